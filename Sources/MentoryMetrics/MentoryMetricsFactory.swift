import NIOConcurrencyHelpers
import CoreMetrics
import MentoryWire
import SwiftProtobuf
import Synchronization

/// mentoryd's swift-metrics backend: it keeps every metric in memory and reports them as a
/// `MetricsReply` (the body of `session.metrics`), which `mentoryctl metrics` renders for people,
/// as JSON or in the Prometheus text format. Nothing listens on the network.
///
/// mentoryd bootstraps one at start-up (`MetricsSystem.bootstrap`), before anything records, and
/// hands the same instance to the engine, which reads its snapshot. Tests make their own.
///
/// - Names: every family's name starts with ``MentoryMetric/prefix`` (added when missing);
///   characters Prometheus does not allow in a name or label name become `_`.
/// - Types: `Counter` is a counter; `Meter` and `Gauge` (a recorder that does not aggregate) are
///   gauges; `Recorder` is a histogram over ``MetricDescription/buckets`` (``MetricBuckets/counts``
///   by default) and `Timer` a histogram in seconds over ``MetricBuckets/seconds``.
/// - Bounded: at most ``maxSeries`` label sets are kept across all families. Past that, a new
///   label set of an existing family is folded into that family's one series labelled
///   `overflow="true"`, and a new family is not kept; both are counted in
///   `mentoryd_metrics_series_refused_total{reason="series_cap"}`. A name reused with another
///   type is not kept either (`reason="type_conflict"`). Either way the caller gets a working
///   handler, so recording never fails.
/// - Thread-safe, as swift-metrics requires: the registry is behind a lock (`NIOLockedValueBox`), each series keeps
///   its value in an `Atomic` or a lock (metrics plumbing, not domain state).
public final class MentoryMetricsFactory: MetricsFactory, Sendable {
    /// The default bound on label sets, all families together.
    public static let defaultMaxSeries = 10_000

    /// The most label sets kept, all families together.
    public let maxSeries: Int
    private let descriptions: [String: MetricDescription]
    private let registry: NIOLockedValueBox<Registry>
    private let refusedForCap = CounterSeries()
    private let refusedForType = CounterSeries()

    /// Creates an empty backend keeping at most `maxSeries` label sets; `descriptions` give the
    /// families their help text and recorder buckets.
    public init(maxSeries: Int = defaultMaxSeries, descriptions: [MetricDescription] = MentoryMetric.all) {
        self.maxSeries = maxSeries
        self.descriptions = Dictionary(descriptions.map { ($0.name, $0) }) { first, _ in first }
        var registry = Registry()
        var refused = Family(kind: .counter, bounds: [])
        refused.series[Labels([("reason", "series_cap")])] = .counter(self.refusedForCap)
        refused.series[Labels([("reason", "type_conflict")])] = .counter(self.refusedForType)
        registry.families[MentoryMetric.seriesRefused.name] = refused
        registry.seriesCount = refused.series.count
        self.registry = NIOLockedValueBox(registry)
    }

    // MARK: MetricsFactory

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard case .counter(let series) = self.series(label, dimensions, kind: .counter) else {
            preconditionFailure("a counter family holds only counters")
        }
        return series
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        guard case .gauge(let series) = self.series(label, dimensions, kind: .gauge) else {
            preconditionFailure("a gauge family holds only gauges")
        }
        return series
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        switch self.series(label, dimensions, kind: aggregate ? .histogram : .gauge) {
        case .gauge(let series): series
        case .histogram(let series): series
        case .counter: preconditionFailure("a recorder is a gauge or a histogram")
        }
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        guard case .histogram(let series) = self.series(label, dimensions, kind: .timer) else {
            preconditionFailure("a timer family holds only histograms")
        }
        return series
    }

    /// The counter series `makeCounter(label:dimensions:)` makes, as its concrete type: for a caller that records
    /// into it directly, with no `Counter` around it (the engine's request counters).
    package func counterSeries(label: String, dimensions: [(String, String)]) -> CounterSeries {
        guard case .counter(let series) = self.series(label, dimensions, kind: .counter) else {
            preconditionFailure("a counter family holds only counters")
        }
        return series
    }

    /// The histogram `makeTimer(label:dimensions:)` makes, as its concrete type: for a caller that records into it
    /// directly, with no `Timer` around it (the engine's request durations).
    package func timerSeries(label: String, dimensions: [(String, String)]) -> HistogramSeries {
        guard case .histogram(let series) = self.series(label, dimensions, kind: .timer) else {
            preconditionFailure("a timer family holds only histograms")
        }
        return series
    }

    public func destroyCounter(_ handler: any CounterHandler) { self.remove(handler) }
    public func destroyMeter(_ handler: any MeterHandler) { self.remove(handler) }
    public func destroyRecorder(_ handler: any RecorderHandler) { self.remove(handler) }
    public func destroyTimer(_ handler: any TimerHandler) { self.remove(handler) }

    // MARK: Snapshot

    /// Every family and its samples now, sorted by name and labels.
    ///
    /// The serialized reply stays within `maxBytes`: families (then samples) that would not fit
    /// are left out and ``Mentory_V1_MetricsReply/truncated`` is set.
    public func snapshot(maxBytes: Int = .max) -> Mentory_V1_MetricsReply {
        let families = self.registry.withLockedValue { registry in registry.families }
        var reply = Mentory_V1_MetricsReply()
        // Room for `truncated` and for each family's tag and length.
        let budget = maxBytes - 16
        var used = 0
        for name in families.keys.sorted() {
            let family = self.wireFamily(name, families[name]!)
            let size = Self.size(of: family) + Self.fieldOverhead
            if used + size <= budget {
                reply.families.append(family)
                used += size
                continue
            }
            var partial = family
            partial.samples = []
            used += Self.size(of: partial) + Self.fieldOverhead
            for sample in family.samples {
                let size = Self.size(of: sample) + Self.fieldOverhead
                guard used + size <= budget else { break }
                partial.samples.append(sample)
                used += size
            }
            if !partial.samples.isEmpty { reply.families.append(partial) }
            reply.truncated = true
            break
        }
        return reply
    }

    /// The number of label sets kept now, all families together (at most ``maxSeries``, plus
    /// one overflow series per family).
    public var seriesCount: Int {
        self.registry.withLockedValue { $0.seriesCount }
    }

    // MARK: Names

    /// `label` as a family name: with the `mentoryd_` prefix, and only characters Prometheus allows.
    public static func familyName(_ label: String) -> String {
        let name = label.hasPrefix(MentoryMetric.prefix) ? label : MentoryMetric.prefix + label
        return String(String.UnicodeScalarView(name.unicodeScalars.map { Self.isNameCharacter($0) ? $0 : "_" }))
    }

    /// `name` as a label name: only letters, digits and `_`, not starting with a digit.
    public static func labelName(_ name: String) -> String {
        let cleaned = String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { Self.isNameCharacter($0) && $0 != ":" ? $0 : "_" }))
        guard let first = cleaned.unicodeScalars.first, !("0"..."9").contains(first) else { return "_" + cleaned }
        return cleaned
    }

    private static func isNameCharacter(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
            || scalar == "_" || scalar == ":"
    }

    // MARK: Registry

    private func series(_ label: String, _ dimensions: [(String, String)], kind: Kind) -> Series {
        let name = Self.familyName(label)
        let labels = Labels(dimensions.map { (Self.labelName($0.0), $0.1) })
        let bounds: [Double] =
            switch kind {
            case .counter, .gauge: []
            case .timer: MetricBuckets.seconds
            case .histogram: self.descriptions[name]?.buckets ?? MetricBuckets.counts
            }
        let maxSeries = self.maxSeries
        let outcome: Outcome = self.registry.withLockedValue { registry in
            guard var family = registry.families[name] else {
                guard registry.seriesCount < maxSeries else { return .refused(.seriesCap) }
                var family = Family(kind: kind, bounds: bounds)
                let series = Series(kind: kind, bounds: bounds)
                family.series[labels] = series
                registry.families[name] = family
                registry.seriesCount += 1
                return .kept(series)
            }
            guard family.kind == kind else { return .refused(.typeConflict) }
            if let series = family.series[labels] { return .kept(series) }
            guard registry.seriesCount < maxSeries else {
                if let overflow = family.overflow { return .folded(overflow) }
                let overflow = Series(kind: kind, bounds: family.bounds)
                family.overflow = overflow
                registry.families[name] = family
                return .folded(overflow)
            }
            let series = Series(kind: kind, bounds: family.bounds)
            family.series[labels] = series
            registry.families[name] = family
            registry.seriesCount += 1
            return .kept(series)
        }
        switch outcome {
        case .kept(let series):
            return series
        case .folded(let series):
            self.refusedForCap.increment(by: 1)
            return series
        case .refused(let reason):
            (reason == .seriesCap ? self.refusedForCap : self.refusedForType).increment(by: 1)
            // Works, but is not reported: recording never fails.
            return Series(kind: kind, bounds: bounds)
        }
    }

    private func remove(_ handler: AnyObject) {
        self.registry.withLockedValue { registry in
            for (name, var family) in registry.families {
                guard let key = family.series.first(where: { $0.value.object === handler })?.key else { continue }
                family.series[key] = nil
                registry.seriesCount -= 1
                registry.families[name] = family.series.isEmpty && family.overflow == nil ? nil : family
                return
            }
        }
    }

    private func wireFamily(_ name: String, _ family: Family) -> Mentory_V1_MetricFamily {
        var wire = Mentory_V1_MetricFamily()
        wire.name = name
        wire.help = self.descriptions[name]?.help ?? "\(name) (no description declared in MentoryMetric)"
        wire.type =
            switch family.kind {
            case .counter: .counter
            case .gauge: .gauge
            case .histogram, .timer: .histogram
            }
        wire.bucketBounds = family.bounds
        var entries = family.series.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        if let overflow = family.overflow {
            entries.append((Labels([("overflow", "true")]), overflow))
        }
        wire.samples = entries.map { labels, series in
            var sample = Mentory_V1_MetricSample()
            sample.labels = labels.pairs.map { pair in
                var label = Mentory_V1_MetricLabel()
                label.name = pair.name
                label.value = pair.value
                return label
            }
            switch series {
            case .counter(let counter):
                sample.value = Double(counter.value)
            case .gauge(let gauge):
                sample.value = gauge.value
            case .histogram(let histogram):
                let counts = histogram.cumulative
                sample.bucketCounts = counts.buckets
                sample.count = counts.count
                sample.sum = counts.sum
            }
            return sample
        }
        return wire
    }

    /// A field's tag and length prefix take at most this many bytes.
    private static let fieldOverhead = 8

    private static func size(of message: some SwiftProtobuf.Message) -> Int {
        ((try? message.serializedBytes()) as [UInt8]?)?.count ?? 0
    }
}

// MARK: - Registry types

extension MentoryMetricsFactory {
    /// What a family holds; a name keeps the kind it was first created with.
    enum Kind: Equatable, Sendable {
        case counter
        case gauge
        /// A `Recorder` that aggregates.
        case histogram
        /// A `Timer`: a histogram in seconds.
        case timer
    }

    enum Series: Sendable {
        case counter(CounterSeries)
        case gauge(GaugeSeries)
        case histogram(HistogramSeries)

        init(kind: Kind, bounds: [Double]) {
            switch kind {
            case .counter: self = .counter(CounterSeries())
            case .gauge: self = .gauge(GaugeSeries())
            case .histogram, .timer: self = .histogram(HistogramSeries(bounds: bounds))
            }
        }

        var object: AnyObject {
            switch self {
            case .counter(let series): series
            case .gauge(let series): series
            case .histogram(let series): series
            }
        }
    }

    enum Reason: Equatable, Sendable {
        case seriesCap
        case typeConflict
    }

    enum Outcome: Sendable {
        case kept(Series)
        case folded(Series)
        case refused(Reason)
    }

    /// A label set, sorted by name; a repeated name keeps its first value.
    struct Labels: Hashable, Comparable, Sendable {
        struct Pair: Hashable, Sendable {
            var name: String
            var value: String
        }

        let pairs: [Pair]

        init(_ dimensions: [(String, String)]) {
            var seen: Set<String> = []
            self.pairs = dimensions.compactMap { name, value in
                seen.insert(name).inserted ? Pair(name: name, value: value) : nil
            }.sorted { $0.name < $1.name }
        }

        static func < (lhs: Labels, rhs: Labels) -> Bool {
            lhs.pairs.lexicographicallyPrecedes(rhs.pairs) { ($0.name, $0.value) < ($1.name, $1.value) }
        }
    }

    struct Family: Sendable {
        let kind: Kind
        /// Histograms' bucket bounds.
        let bounds: [Double]
        var series: [Labels: Series] = [:]
        /// Where new label sets go once ``MentoryMetricsFactory/maxSeries`` is reached.
        var overflow: Series?

        init(kind: Kind, bounds: [Double]) {
            self.kind = kind
            self.bounds = bounds
        }
    }

    struct Registry: Sendable {
        var families: [String: Family] = [:]
        /// Label sets kept, overflow series excluded.
        var seriesCount = 0
    }
}
