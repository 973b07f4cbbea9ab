// swift-tools-version:6.0
import PackageDescription

// The benchmark suite is its own package so the library itself depends on nothing but liblz4.
let package = Package(
    name: "CaskBenchmarks",
    dependencies: [.package(name: "Cask", path: "..")],
    targets: [
        .executableTarget(
            name: "cask-bench",
            dependencies: [.product(name: "Cask", package: "Cask")],
            path: "Sources/cask-bench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
