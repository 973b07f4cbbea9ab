import Foundation

extension CaskStore {
    /// The id of the dictionary new segments name (the writer's); nil without one, and for a
    /// read-only handle.
    package var dictionaryForNewSegments: UInt32? {
        writer?.withLock { $0.dictionaryForNewSegments?.id }
    }

    /// Trains a dictionary from the writer's samples on a thread of its own (about
    /// 0.3 s for 4 MiB) and, if it saves at least ``DictionaryTrainer/minimumGain`` of the bytes on
    /// the held-out samples (and that much more than the current one, when the writer's
    /// ``DictionaryDrift`` asked for it), writes it durably and hands it to the writer, whose next write then
    /// seals the active segment so that the new one names it. A dictionary not worth it (values
    /// that do not share content), a training that finds nothing to learn, or a dictionary that
    /// cannot be written, leaves the store without one until it is opened again. `close()` waits
    /// for it. Under the writer mutex.
    func startTraining(_ w: inout StoreWriter) {
        guard let sampler = w.sampler, let writer else { return }
        w.sampler = nil
        let dictionaries = dictionaries, work = backgroundWork, current = w.dictionaryForNewSegments, options = options.dictionaries
        work.enter()
        let thread = Thread {
            defer { work.leave() }
            guard let trained = DictionaryTrainer.trainAndMeasure(samples: sampler.samples, sizes: sampler.sizes, against: current?.lz4),
                  trained.isWorthUsing,
                  let dictionary = try? dictionaries.add(content: trained.content, ratio: trained.ratio)
            else { return }
            writer.withLock { w in
                // Only the newest: a training that finished first must not replace a later one's.
                guard !w.closed, dictionaries.current?.id == dictionary.id else { return }
                w.adopt(dictionary, expectedRatio: trained.ratio, options: options)
            }
        }
        thread.name = "cask.dictionary-training"
        thread.start()
    }
}
