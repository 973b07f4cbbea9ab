import Foundation

/// The model the `objects` workloads store: a user profile as an app keeps one — ten fields of the
/// common Codable kinds (UUID, strings, integer, Date, Bool, Double, an optional URL, an array of
/// strings) and a nested array of two or three addresses. About 450 bytes as JSON.
struct Profile: Codable, Sendable, Equatable {
    var id: UUID
    var name: String
    var email: String
    var age: Int
    var createdAt: Date
    var isVerified: Bool
    var score: Double
    var avatar: URL?
    var tags: [String]
    var addresses: [Address]
}

struct Address: Codable, Sendable, Equatable {
    var street: String
    var city: String
    var postalCode: String
    var country: String
}

/// The profiles the `objects` workloads write, deterministic for the seed (every variant, each in
/// its own process, writes the same objects). A pool of distinct profiles is drawn once; object `n`
/// is `pool[n % pool.count]` with its own id, so every stored object differs (as BenchmarkData
/// wraps its value pieces) and building one inside a timed loop costs a copy, not a generation.
/// Values are chosen to survive every coder exactly: dates are whole seconds, scores hundredths.
struct ProfileData: Sendable {
    static let poolSize = 4096
    let pool: [Profile]
    /// The high half of every id (a version-4 UUID); the low half is the object's number.
    private let idPrefix: UInt64

    init(seed: UInt64) {
        var rng = SplitMix(seed: seed)
        idPrefix = (rng.next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        var pool: [Profile] = []
        pool.reserveCapacity(Self.poolSize)
        for _ in 0..<Self.poolSize { pool.append(Self.draw(&rng)) }
        self.pool = pool
    }

    /// Object `n`: a pool profile with the id of `n`.
    func profile(_ n: Int) -> Profile {
        var profile = pool[n % Self.poolSize]
        profile.id = id(n)
        return profile
    }

    /// The id of object `n` (distinct for every `n`).
    func id(_ n: Int) -> UUID {
        // The variant bits (10) on top of the number; the number fits in the remaining 62 bits.
        var halves = (idPrefix.bigEndian, (UInt64(n) | 0x8000_0000_0000_0000).bigEndian)
        return withUnsafeBytes(of: &halves) { UUID(uuid: $0.load(as: uuid_t.self)) }
    }

    /// The key object `n` is stored under.
    static func key(_ n: Int) -> String { "users/\(n)" }

    // MARK: Drawing

    private static let firstNames = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Dennis", "Frances",
                                     "John", "Radia", "Leslie", "Niklaus", "Shafi", "Tony", "Lynn", "Butler", "Jean", "Whitfield"]
    private static let lastNames = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson", "Ritchie",
                                    "Allen", "Backus", "Perlman", "Lamport", "Wirth", "Goldwasser", "Hoare", "Conway", "Lampson", "Sammet", "Diffie"]
    private static let domains = ["example.com", "mail.example.org", "post.example.net", "inbox.example.io"]
    private static let streets = ["Main Street", "Church Road", "Station Avenue", "Mill Lane", "Park Boulevard", "Harbour View",
                                  "Kings Road", "Elm Street", "Rue de la Paix", "Hauptstraße", "Calle Mayor", "Via Roma"]
    private static let cities = ["London", "Paris", "Berlin", "Madrid", "Rome", "Amsterdam", "Lisbon", "Vienna", "Oslo", "Zürich",
                                 "Dublin", "Prague", "Warsaw", "Helsinki", "Athens", "Brussels"]
    private static let countries = ["GB", "FR", "DE", "ES", "IT", "NL", "PT", "AT", "NO", "CH", "IE", "CZ", "PL", "FI", "GR", "BE"]
    private static let tagWords = ["admin", "beta", "premium", "newsletter", "early-adopter", "support", "mobile", "desktop",
                                   "verified-email", "two-factor", "team", "trial", "archived", "moderator", "partner", "vip"]

    private static func pick<T>(_ list: [T], _ rng: inout SplitMix) -> T { list[Int(rng.next() % UInt64(list.count))] }

    private static func draw(_ rng: inout SplitMix) -> Profile {
        let first = pick(firstNames, &rng), last = pick(lastNames, &rng)
        let number = rng.next() % 1000
        let tagCount = Int(rng.next() % 6)
        var tags: [String] = []
        while tags.count < tagCount {
            let tag = pick(tagWords, &rng)
            if !tags.contains(tag) { tags.append(tag) }
        }
        let addresses = (0..<(2 + Int(rng.next() % 2))).map { _ in
            let city = Int(rng.next() % UInt64(cities.count))
            return Address(street: "\(1 + rng.next() % 250) \(pick(streets, &rng))", city: cities[city],
                           postalCode: String(format: "%05d", Int(rng.next() % 100_000)), country: countries[city])
        }
        return Profile(
            id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),  // `profile(_:)` gives each object its own
            name: "\(first) \(last)",
            email: "\(first.lowercased()).\(last.lowercased())\(number)@\(pick(domains, &rng))",
            age: 18 + Int(rng.next() % 72),
            createdAt: Date(timeIntervalSince1970: Double(1_500_000_000 + rng.next() % 300_000_000)),
            isVerified: rng.next() % 3 != 0,
            score: Double(rng.next() % 100_000) / 100,
            avatar: rng.next() % 4 == 0 ? nil : URL(string: "https://cdn.example.com/avatars/\(String(rng.next(), radix: 16)).png"),
            tags: tags,
            addresses: addresses)
    }
}
