/// A framing failure: the byte stream can no longer be split into frames.
///
/// After any of these the stream is out of step, so the connection has to close.
public enum FrameError: Error, Equatable, Sendable {
    /// The length prefix announced more bytes than the configured maximum.
    case frameTooLarge(length: Int, maximum: Int)
    /// The stream ended part-way through a frame.
    case truncatedFrame(bufferedBytes: Int)
}

extension FrameError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .frameTooLarge(let length, let maximum):
            "frame of \(length) bytes exceeds the maximum of \(maximum) bytes"
        case .truncatedFrame(let bufferedBytes):
            "connection ended in the middle of a frame (\(bufferedBytes) bytes buffered)"
        }
    }
}
