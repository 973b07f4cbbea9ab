import Foundation
#if canImport(Glibc)
import Glibc
#endif

// The libFuzzer entry points of `cask-fuzz`, the one binary Tools/fuzz.sh builds from this folder
// and the library's sources. `CASK_FUZZ_TARGET` picks the target:
//   store-image     a store directory image through verify, open, compaction, reopen and repair
//   object-decoder  arbitrary bytes through the binary object decoder
//   lz4-expander    arbitrary bytes as an LZ4 block, through the read path's expander and liblz4
//   json-lines      arbitrary bytes as a line of `cask import` input, through the tool's strict reader
//   property-list   arbitrary bytes through the property-list reader of `cask import-defaults`
// With `CASK_FUZZ_WRITE_SEEDS=DIR` set, the binary writes the target's seed corpus into DIR and exits.

private enum FuzzTarget: String {
    case storeImage = "store-image"
    case objectDecoder = "object-decoder"
    case lz4Expander = "lz4-expander"
    case jsonLines = "json-lines"
    case propertyList = "property-list"

    static let selected: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["CASK_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            fatalError("set CASK_FUZZ_TARGET to store-image, object-decoder, lz4-expander, json-lines or property-list (got '\(name)')")
        }
        return target
    }()
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    let target = FuzzTarget.selected
    guard let seeds = ProcessInfo.processInfo.environment["CASK_FUZZ_WRITE_SEEDS"] else { return 0 }
    do {
        try FileManager.default.createDirectory(atPath: seeds, withIntermediateDirectories: true)
        switch target {
        case .storeImage: try StoreImageFuzzer.writeSeeds(to: seeds)
        case .objectDecoder: try ObjectDecoderFuzzer.writeSeeds(to: seeds)
        case .lz4Expander: try LZ4ExpanderFuzzer.writeSeeds(to: seeds)
        case .jsonLines: try JSONLinesFuzzer.writeSeeds(to: seeds)
        case .propertyList: try PropertyListFuzzer.writeSeeds(to: seeds)
        }
    } catch {
        fatalError("writing the seed corpus: \(error)")
    }
    exit(0)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: count)
    switch FuzzTarget.selected {
    case .storeImage: StoreImageFuzzer.run(bytes)
    case .objectDecoder: ObjectDecoderFuzzer.run(bytes)
    case .lz4Expander: LZ4ExpanderFuzzer.run(bytes)
    case .jsonLines: JSONLinesFuzzer.run(bytes)
    case .propertyList: PropertyListFuzzer.run(bytes)
    }
    return 0
}
