import Cask

extension EncryptionAlgorithm {
    /// The name the tool takes (`rekey --algorithm`) and prints in JSON: `aes256gcm`, `xchacha20poly1305`.
    var name: String {
        switch self {
        case .aes256gcm: "aes256gcm"
        case .xchacha20poly1305: "xchacha20poly1305"
        }
    }

    /// The algorithm called `name`, or nil.
    init?(name: String) {
        guard let algorithm = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = algorithm
    }

    /// `aes256gcm or xchacha20poly1305`, for messages.
    static var names: String { allCases.map(\.name).joined(separator: " or ") }
}
