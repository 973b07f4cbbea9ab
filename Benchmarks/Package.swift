// swift-tools-version:6.0
import PackageDescription

// The benchmark suite is its own package so the library itself depends on nothing but liblz4.
// The peers are the Debian packages' C APIs (Tools/bench-setup.sh installs them), one system
// library target each; the executable drives every engine through one small protocol.
let package = Package(
    name: "CaskBenchmarks",
    dependencies: [.package(name: "Cask", path: "..")],
    targets: [
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        .systemLibrary(name: "CLMDB", path: "Sources/CLMDB"),
        .systemLibrary(name: "CLevelDB", path: "Sources/CLevelDB"),
        .systemLibrary(name: "CRocksDB", path: "Sources/CRocksDB"),
        .executableTarget(
            name: "cask-bench",
            dependencies: [
                .product(name: "Cask", package: "Cask"),
                // Counts heap allocations per thread (the allocations-per-operation figures).
                .product(name: "CaskAllocationCounter", package: "Cask"),
                "CSQLite", "CLMDB", "CLevelDB", "CRocksDB",
            ],
            path: "Sources/cask-bench"
        ),
        // A probe of listings with values on a store written in random and in key order.
        .executableTarget(name: "listing-order-probe", dependencies: [.product(name: "Cask", package: "Cask")], path: "Sources/listing-order-probe"),
    ],
    swiftLanguageModes: [.v6]
)
