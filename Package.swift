// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Cask",
    products: [
        .library(name: "Cask", targets: ["Cask"]),
        .executable(name: "cask", targets: ["cask"]),
        // For the benchmarks and the tests only: replaces the process's malloc to count allocations
        // per thread. Never link it into an application.
        .library(name: "CaskAllocationCounter", targets: ["CAllocationCounter"]),
    ],
    targets: [
        // The system LZ4 library (Debian: liblz4-dev). The only C dependency of the store.
        .systemLibrary(
            name: "CLZ4",
            path: "Sources/CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        // The system zstd library (Debian: libzstd-dev): its dictionary trainer (`ZDICT_trainFromBuffer`;
        // records are LZ4 blocks, compressed against trained dictionaries), and the frames hint
        // file blocks are stored in.
        .systemLibrary(
            name: "CZstd",
            path: "Sources/CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"])]
        ),
        // The system libsodium (Debian: libsodium-dev), for encryption at rest (Options.encryption):
        // its AEADs, a key derivation (HChaCha20) and random bytes.
        .systemLibrary(
            name: "CSodium",
            path: "Sources/CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // CPU instructions Swift cannot emit: CRC-32C (SSE4.2 / ARMv8 CRC) and a cache-line prefetch.
        .target(name: "CCaskCPU", path: "Sources/CCaskCPU"),
        .target(name: "Cask", dependencies: ["CLZ4", "CZstd", "CSodium", "CCaskCPU"], path: "Sources/Cask"),
        .executableTarget(name: "cask", dependencies: ["Cask"], path: "Tools/cask"),
        // A child process for the crash tests: writes, logs acknowledgements, gets SIGKILLed.
        .executableTarget(name: "cask-crash-writer", dependencies: ["Cask", "CaskTestSupport"], path: "Tools/cask-crash-writer"),
        .target(name: "CaskTestSupport", dependencies: ["Cask"], path: "Tests/CaskTestSupport"),
        // Counts heap allocations per thread (AllocationTests; the benchmark's allocs_put/allocs_get).
        .target(name: "CAllocationCounter", path: "Tests/CAllocationCounter"),
        .testTarget(
            name: "CaskTests",
            dependencies: ["Cask", "CaskTestSupport", "CAllocationCounter", "cask", "cask-crash-writer"],
            path: "Tests/CaskTests",
            exclude: ["Fixtures"]
        ),
        // Every ```swift block of README.md and docs/, compiled and run (Tools/extract-examples.py).
        .testTarget(
            name: "DocumentationExamples",
            dependencies: ["Cask", "CaskTestSupport"],
            path: "Tests/DocumentationExamples"
        ),
    ],
    swiftLanguageModes: [.v6]
)
