import Foundation

/// The command-line tool's workloads (issue 24), one worker per run: the release `cask` binary
/// timed as a child process, as a user runs it, on the suite's data — beside LMDB's own tools on
/// the same data in their text format.
///
/// - `tool_import`: `cask import DIR --input data.jsonl` into a new store, against
///   `mdb_load -f data.txt DIR` into a new environment (`mdb_dump`'s hex format: "bytevalue").
/// - `tool_export`: `cask export DIR` and `mdb_dump DIR` of those stores, standard output to a file;
///   each output is checked against the input it was loaded from (cask's byte for byte).
/// - `tool_list`: `cask list DIR`, to a file; LMDB's tools have no listing of keys alone, so no peer.
///
/// The input is the suite's keys 0…num−1 in order (as `cask export` writes them) with value `n` for
/// key `n`: printable ASCII, so every value is a JSON string (a `"` or `\` in it escaped). Which
/// engine goes first alternates from run to run. Both tools find their input in the page cache,
/// written just before. What each command promises differs: `cask import` syncs once, at the end;
/// `mdb_load` commits (and so `fdatasync`s) every 100 entries, which its options cannot change;
/// `cpu_s` on each line is the child's CPU time, the work either does apart from waiting for the disk.
struct ToolSuite {
    let data: BenchmarkData
    let root: String
    let run: Int
    let only: Set<String>?
    /// The `cask` binary (a release build).
    let cask: String

    static let workloads = WorkloadName.tool

    func wanted(_ name: String) -> Bool { only == nil || only!.contains(name) }

    func runWorkloads() throws {
        guard let mdbLoad = ChildProcess.find("mdb_load"), let mdbDump = ChildProcess.find("mdb_dump") else {
            throw BenchError.check("the tool workloads compare with mdb_load and mdb_dump, which are not on PATH: install lmdb-utils (Tools/bench-setup.sh does)")
        }
        let json = root + "/tool-input.jsonl", text = root + "/tool-input.txt"
        try writeInputs(json: json, mdb: text)
        let caskStore = root + "/tool-cask", lmdbStore = root + "/tool-lmdb"
        try FileManager.default.createDirectory(atPath: lmdbStore, withIntermediateDirectories: true)
        let jsonBytes = Self.size(json), textBytes = Self.size(text)
        // The engines take turns: cask first in even runs, LMDB's tools first in odd ones.
        func inTurn(_ caskSide: () throws -> Void, _ lmdbSide: () throws -> Void) throws {
            if run % 2 == 0 { try caskSide(); try lmdbSide() } else { try lmdbSide(); try caskSide() }
        }

        // tool_import (the stores the other two read).
        try inTurn({
            let outcome = try time("cask", "tool_import", cask, ["import", caskStore, "--input", json], bytes: jsonBytes, store: caskStore)
            guard outcome.contains("imported \(data.count) entries") else { throw BenchError.check("cask import: \(outcome)") }
        }, {
            _ = try time("lmdb", "tool_import", mdbLoad, ["-f", text, lmdbStore], bytes: textBytes, store: lmdbStore)
        })

        if wanted("tool_export") {
            let caskOutput = root + "/tool-export.jsonl", lmdbOutput = root + "/tool-export.txt"
            try inTurn({
                _ = try time("cask", "tool_export", cask, ["export", caskStore], bytes: jsonBytes, store: caskStore, stdout: caskOutput)
                guard FileManager.default.contentsEqual(atPath: caskOutput, andPath: json) else {
                    throw BenchError.check("cask export wrote other bytes than the input cask import read (\(caskOutput), \(json))")
                }
            }, {
                _ = try time("lmdb", "tool_export", mdbDump, [lmdbStore], bytes: textBytes, store: lmdbStore, stdout: lmdbOutput)
                guard try Self.records(of: lmdbOutput) == Self.records(of: text) else {
                    throw BenchError.check("mdb_dump wrote other records than mdb_load read (\(lmdbOutput), \(text))")
                }
            })
            try? FileManager.default.removeItem(atPath: caskOutput)
            try? FileManager.default.removeItem(atPath: lmdbOutput)
        }

        if wanted("tool_list") {
            let output = root + "/tool-list.txt"
            _ = try time("cask", "tool_list", cask, ["list", caskStore], bytes: nil, store: caskStore, stdout: output)
            let listed = try Data(contentsOf: URL(fileURLWithPath: output))
            let key = KeyBuffer()
            guard listed.count == data.count * (KeyBuffer.keyLength + 1),
                  listed.prefix(KeyBuffer.keyLength).elementsEqual(key.key(0)),
                  listed.suffix(KeyBuffer.keyLength + 1).dropLast().elementsEqual(key.key(data.count - 1)) else {
                throw BenchError.check("cask list did not list keys 0…\(data.count - 1), one a line (\(output))")
            }
            try? FileManager.default.removeItem(atPath: output)
        }
    }

    /// Runs one command and prints its RESULT line (when its workload was asked for); returns its
    /// standard output and error, for the caller's check. `bytes`: the text moved, for MB/s (nil:
    /// the output's size).
    private func time(_ engine: String, _ workload: String, _ executable: String, _ arguments: [String],
                      bytes: Int?, store: String, stdout: String? = nil) throws -> String {
        let out = stdout ?? root + "/tool-\(engine)-\(workload).out", err = root + "/tool-\(engine)-\(workload).err"
        // A spawned child inherits this process's peak RSS as its own until it execs (the kernel
        // counts the address space it leaves): start that peak afresh, from this worker's small RSS.
        ProcessStats.resetPeak()
        let outcome = try ChildProcess.run(executable, arguments, stdout: out, stderr: err)
        let said = stdout == nil ? (try? String(contentsOfFile: out, encoding: .utf8)) ?? "" : ""
        let complaint = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        guard outcome.status == 0 else {
            throw BenchError.check("\((executable as NSString).lastPathComponent) \(arguments.joined(separator: " ")) exited with \(outcome.status): \(complaint)")
        }
        let measurement = Measurement(
            engine: engine, workload: workload, mode: "tool", num: data.count, valueSize: data.valueSize, seconds: outcome.seconds,
            bytes: bytes ?? Self.size(out), diskBytes: ProcessStats.diskBytes(store), rssKB: outcome.peakRSSKB,
            extra: [("tool", engine == "cask" ? "cask-" + arguments[0] : (executable as NSString).lastPathComponent),
                    ("cpu_s", String(format: "%.3f", outcome.cpuSeconds)), ("seconds", String(format: "%.4f", outcome.seconds))])
        if wanted(workload) {
            print(measurement.line)
            fflush(nil)
        }
        return said + complaint
    }

    /// Writes the input of both tools, a MiB at a time: JSON Lines as `cask export` writes them,
    /// and `mdb_dump`'s hex text ("bytevalue": a line of hex digits for each key and each value,
    /// after a header).
    private func writeInputs(json: String, mdb: String) throws {
        guard FileManager.default.createFile(atPath: json, contents: nil), FileManager.default.createFile(atPath: mdb, contents: nil),
              let jsonFile = FileHandle(forWritingAtPath: json), let mdbFile = FileHandle(forWritingAtPath: mdb) else {
            throw BenchError.check("cannot create \(json) and \(mdb)")
        }
        defer { try? jsonFile.close(); try? mdbFile.close() }
        var lines: [UInt8] = [], text: [UInt8] = []
        func drain(force: Bool = false) throws {
            if force || lines.count >= 1 << 20 { try jsonFile.write(contentsOf: lines); lines.removeAll(keepingCapacity: true) }
            if force || text.count >= 1 << 20 { try mdbFile.write(contentsOf: text); text.removeAll(keepingCapacity: true) }
        }
        // A map several times the data: LMDB's B-tree pages are half full after random splits, and
        // the file is sparse, so a large map costs nothing.
        let mapSize = (data.count * (KeyBuffer.keyLength + data.valueSize) * 4 / 4096 + 16_384) * 4096
        text += Array("VERSION=3\nformat=bytevalue\ntype=btree\nmapsize=\(mapSize)\nmaxreaders=126\nHEADER=END\n".utf8)
        let hex = Array("0123456789abcdef".utf8)
        func appendHex(_ bytes: UnsafeRawBufferPointer) {
            text.append(UInt8(ascii: " "))
            for byte in bytes {
                text.append(hex[Int(byte >> 4)])
                text.append(hex[Int(byte & 15)])
            }
            text.append(UInt8(ascii: "\n"))
        }
        let key = KeyBuffer()
        for n in 0..<data.count {
            let keyBytes = key.key(n), value = data.value(n)
            lines += Array(#"{"key":""#.utf8)
            lines += keyBytes
            lines += Array(#"","value":""#.utf8)
            for byte in value {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { lines.append(UInt8(ascii: "\\")) }
                lines.append(byte)
            }
            lines += Array("\"}\n".utf8)
            appendHex(keyBytes)
            appendHex(value)
            try drain()
        }
        text += Array("DATA=END\n".utf8)
        try drain(force: true)
    }

    /// The records of a file in `mdb_dump`'s format: what follows the header's last line.
    private static func records(of path: String) throws -> Data {
        let contents = try Data(contentsOf: URL(fileURLWithPath: path))
        guard let end = contents.range(of: Data("HEADER=END\n".utf8)) else { throw BenchError.check("\(path) has no HEADER=END line") }
        return contents[end.upperBound...]
    }

    private static func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
    }
}
