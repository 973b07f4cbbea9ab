/// Step 2: making durable what the copy relies on, then the outputs; or discarding them.
extension Compactor {
    /// Between steps 1 and 2: makes durable what the outputs rely on. The inputs, which recovery may
    /// read beside the outputs; and every record the index pointed at during the copy, since it may
    /// shadow one the copy dropped. In `.os` and `.buffered` modes the inputs and the active segment
    /// may not be synced yet (and `.buffered` records may still be in the buffer); in `.fsync` mode a
    /// write is indexed before its `fdatasync`. Without this a power cut could leave the outputs
    /// beside inputs missing their tail, or drop a record for a newer one that is then lost: a
    /// deleted or overwritten value would come back.
    func syncWhatTheCopyRelies(on inputs: [SegmentFile]) throws(CaskError) {
        let files = try writer.withLock { (w) throws(CaskError) -> [SegmentFile] in
            try w.checkUsable()
            try CaskStore.flushBuffer(&w, bufferLimit: options.bufferSize, state: state)
            // Oldest first (inputs not awaiting a sync were synced, or recovered, before the rest).
            let awaiting = Set(w.unsyncedSealed.map(\.id))
            return inputs.filter { !awaiting.contains($0.id) } + w.unsyncedSealed + [w.active]
        }
        for file in files {
            do throws(Errno) { try fileSystem.fdatasync(file.fd) } catch {
                // The kernel may have dropped the data and reports that only once: stop writing.
                let failure = CaskError.syncFailed(path: file.path, errno: error)
                writer.withLock { w in if w.failure == nil { w.failure = failure } }
                throw failure
            }
        }
    }

    /// Step 2: headers (the base seq is the lowest seq copied in), sync, rename, directory sync.
    func publish(_ outputs: [Output]) throws(CaskError) {
        for output in outputs {
            try flush(output)
            let sealing = encryption.flatMap { encryption in
                output.sealing.map {
                    SegmentHeader.Sealing(
                        algorithm: encryption.algorithm, storeID: encryption.storeID, salt: $0.salt, dictionarySalt: output.dictionary?.salt)
                }
            }
            let header = SegmentHeader(segmentID: output.id, baseSeq: output.stats.minSeq ?? 1, dictionaryID: output.dictionary?.id ?? 0,
                dictionaryChecksum: output.dictionary?.checksum ?? 0, sealing: sealing, keyPrefix: output.keyPrefix).encoded(cipher: output.sealing?.cipher)
            do throws(Errno) {
                try header.withBytes { (raw) throws(Errno) in try fileSystem.writeAll(output.fd, from: raw, at: 0) }
                try fileSystem.fdatasync(output.fd)
            } catch {
                throw CaskError.from(error, operation: "sync compaction output", path: output.temporaryPath)
            }
        }
        for output in outputs {
            do throws(Errno) { try fileSystem.rename(output.temporaryPath, to: output.path) } catch {
                throw CaskError.from(error, operation: "rename compaction output", path: output.path)
            }
        }
        do throws(Errno) { try fileSystem.syncDirectory(directory) } catch {
            throw CaskError.from(error, operation: "sync directory", path: directory)
        }
    }

    /// Removes what a failed compaction wrote. Its outputs only ever hold copies, so removing them
    /// (renamed or not) loses nothing.
    func discard(_ outputs: [Output]) {
        for output in outputs {
            fileSystem.close(output.fd)
            try? fileSystem.unlink(output.temporaryPath)
            try? fileSystem.unlink(output.path)
        }
    }

    func openOutputs(_ outputs: [Output]) throws(CaskError) -> [SegmentFile] {
        outputs.map { output in
            SegmentFile(
                id: output.id, path: output.path, fd: output.fd, length: output.length, fileSystem: fileSystem,
                mapLength: options.memoryMapping ? Int(output.length) : 0, dictionary: output.dictionary.map { .loaded($0) } ?? .none,
                sealing: output.sealing, keyPrefix: output.keyPrefix)
        }
    }
}
