//! The AWS event-stream framing (`application/vnd.amazon.eventstream`) that ConverseStream answers
//! in: [`FrameDecoder`] cuts [`Frame`]s out of bytes that arrive cut anywhere.
//!
//! A frame is, big-endian: its total length (4 bytes), the length of its headers (4), the CRC-32
//! of those 8 bytes (4); the headers; the payload; the CRC-32 of everything before it (4). A
//! header is a name (1-byte length, UTF-8) and a typed value (1-byte type, then the value: none
//! for booleans, 1, 2, 4 or 8 bytes for integers and timestamps, 16 for a UUID, a 2-byte length
//! and the bytes for byte arrays and strings). Both CRCs are checked; a frame whose prelude says
//! it is longer than the limit fails before its bytes are held. Nothing panics on any input.

use crate::error::LlmError;

/// The prelude: total length, headers length, prelude CRC.
const PRELUDE_BYTES: usize = 12;

/// The CRC that ends a frame.
const CRC_BYTES: usize = 4;

/// One frame: its string headers (headers of other types are skipped) and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Frame {
    headers: Vec<(String, String)>,
    /// The payload.
    pub(super) payload: Vec<u8>,
}

impl Frame {
    /// The value of string header `name`.
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Cuts frames out of bytes cut anywhere, holding at most one frame (no more than its limit) and
/// the rest of the last chunk.
#[derive(Debug)]
pub(super) struct FrameDecoder {
    provider: String,
    max_frame_bytes: usize,
    buffer: Vec<u8>,
}

impl FrameDecoder {
    /// A decoder for `provider` (the label in errors) of frames of at most `max_frame_bytes`.
    pub(super) fn new(provider: &str, max_frame_bytes: usize) -> Self {
        Self {
            provider: provider.to_owned(),
            max_frame_bytes,
            buffer: Vec::new(),
        }
    }

    /// Takes the next bytes and appends the frames they complete to `frames`. A frame with a
    /// bad CRC or a bad header is [`LlmError::Decode`]; one longer than the limit
    /// [`LlmError::TooLarge`].
    pub(super) fn push(&mut self, bytes: &[u8], frames: &mut Vec<Frame>) -> Result<(), LlmError> {
        self.buffer.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(length) = self.frame_length(&self.buffer[start..])? {
            let Some(frame) = self.buffer.get(start..start + length) else {
                break;
            };
            frames.push(self.frame(frame)?);
            start += length;
        }
        self.buffer.drain(..start);
        Ok(())
    }

    /// The length of the frame `bytes` starts with, once its prelude is there and checked.
    fn frame_length(&self, bytes: &[u8]) -> Result<Option<usize>, LlmError> {
        let Some(prelude) = bytes.get(..PRELUDE_BYTES) else {
            return Ok(None);
        };
        let (total, _, crc) = (be_u32(prelude, 0), be_u32(prelude, 4), be_u32(prelude, 8));
        if Some(crc32(&prelude[..8])) != crc {
            return Err(self.bad("the CRC of a frame's prelude does not match"));
        }
        let total = total.map_or(0, |t| t as usize);
        if total < PRELUDE_BYTES + CRC_BYTES {
            return Err(self.bad(format!("a frame says it is {total} bytes long")));
        }
        if total > self.max_frame_bytes {
            return Err(LlmError::TooLarge {
                provider: self.provider.clone(),
                limit: self.max_frame_bytes,
            });
        }
        Ok(Some(total))
    }

    /// Reads one whole frame (its prelude already checked).
    fn frame(&self, frame: &[u8]) -> Result<Frame, LlmError> {
        let crc_at = frame.len() - CRC_BYTES;
        if Some(crc32(&frame[..crc_at])) != be_u32(frame, crc_at) {
            return Err(self.bad("the CRC of a frame does not match"));
        }
        let headers_length = be_u32(frame, 4).map_or(usize::MAX, |l| l as usize);
        let Some(headers) = PRELUDE_BYTES
            .checked_add(headers_length)
            .and_then(|end| frame.get(PRELUDE_BYTES..end).filter(|_| end <= crc_at))
        else {
            return Err(self.bad("a frame's headers are longer than the frame"));
        };
        let payload = frame
            .get(PRELUDE_BYTES + headers.len()..crc_at)
            .unwrap_or_default();
        Ok(Frame {
            headers: self.headers(headers)?,
            payload: payload.to_vec(),
        })
    }

    /// The string headers of a frame.
    fn headers(&self, mut bytes: &[u8]) -> Result<Vec<(String, String)>, LlmError> {
        let mut headers = Vec::new();
        while let Some((&name_length, rest)) = bytes.split_first() {
            let bad = || self.bad("a frame has a malformed header");
            let (name, rest) = rest
                .split_at_checked(usize::from(name_length))
                .ok_or_else(bad)?;
            let (&kind, rest) = rest.split_first().ok_or_else(bad)?;
            let fixed = match kind {
                0 | 1 => Some(0),
                2 => Some(1),
                3 => Some(2),
                4 => Some(4),
                5 | 8 => Some(8),
                9 => Some(16),
                6 | 7 => None,
                _ => return Err(self.bad(format!("a frame has a header of unknown type {kind}"))),
            };
            bytes = match fixed {
                Some(length) => rest.get(length..).ok_or_else(bad)?,
                None => {
                    let (length, rest) = rest.split_at_checked(2).ok_or_else(bad)?;
                    let length = u16::from_be_bytes([length[0], length[1]]);
                    let (value, rest) =
                        rest.split_at_checked(usize::from(length)).ok_or_else(bad)?;
                    if kind == 7 {
                        let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| bad());
                        headers.push((text(name)?, text(value)?));
                    }
                    rest
                }
            };
        }
        Ok(headers)
    }

    /// A [`LlmError::Decode`] saying what is wrong with the event stream.
    fn bad(&self, message: impl std::fmt::Display) -> LlmError {
        LlmError::Decode {
            provider: self.provider.clone(),
            message: format!("bad event stream: {message}"),
        }
    }
}

/// The big-endian `u32` at `at`.
fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let word: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(word))
}

/// The CRC-32 (IEEE) of `bytes`, as the event-stream framing uses it.
fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// A frame with string `headers` and `payload`, for tests.
#[cfg(test)]
pub(super) fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    for (name, value) in headers {
        head.push(name.len() as u8);
        head.extend_from_slice(name.as_bytes());
        head.push(7);
        head.extend_from_slice(&(value.len() as u16).to_be_bytes());
        head.extend_from_slice(value.as_bytes());
    }
    let total = PRELUDE_BYTES + head.len() + payload.len() + CRC_BYTES;
    let mut frame = Vec::new();
    frame.extend_from_slice(&(total as u32).to_be_bytes());
    frame.extend_from_slice(&(head.len() as u32).to_be_bytes());
    frame.extend_from_slice(&crc32(&frame).to_be_bytes());
    frame.extend_from_slice(&head);
    frame.extend_from_slice(payload);
    frame.extend_from_slice(&crc32(&frame).to_be_bytes());
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8], step: usize, max: usize) -> Result<Vec<Frame>, LlmError> {
        let mut decoder = FrameDecoder::new("p", max);
        let mut frames = Vec::new();
        for piece in bytes.chunks(step) {
            decoder.push(piece, &mut frames)?;
        }
        Ok(frames)
    }

    #[test]
    fn crc32_of_the_check_string() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn decodes_frames_cut_anywhere() {
        let mut bytes = encode(
            &[
                (":event-type", "contentBlockDelta"),
                (":message-type", "event"),
            ],
            "{\"delta\":{\"text\":\"22°C\"}}".as_bytes(),
        );
        bytes.extend(encode(&[(":event-type", "messageStop")], b""));
        for step in 1..=bytes.len() {
            let frames = decode(&bytes, step, 1000).unwrap();
            assert_eq!(frames.len(), 2, "step {step}");
            assert_eq!(frames[0].header(":event-type"), Some("contentBlockDelta"));
            assert_eq!(frames[0].header(":message-type"), Some("event"));
            assert_eq!(
                frames[0].payload,
                "{\"delta\":{\"text\":\"22°C\"}}".as_bytes()
            );
            assert_eq!(frames[1].header(":event-type"), Some("messageStop"));
            assert!(frames[1].payload.is_empty());
        }
        // An unfinished frame is held, not handed over.
        assert_eq!(decode(&bytes[..bytes.len() - 1], 5, 1000).unwrap().len(), 1);
    }

    #[test]
    fn skips_headers_of_other_types() {
        // A frame with a bool, an int32, a byte array and a UUID header, then a string one.
        let mut head = vec![1, b'a', 0, 1, b'b', 4, 0, 0, 0, 7, 1, b'c', 6, 0, 2, 9, 9];
        head.extend([1, b'u', 9]);
        head.extend([0; 16]);
        head.extend([1, b's', 7, 0, 2, b'o', b'k']);
        let total = (PRELUDE_BYTES + head.len() + CRC_BYTES) as u32;
        let mut frame = total.to_be_bytes().to_vec();
        frame.extend((head.len() as u32).to_be_bytes());
        frame.extend(crc32(&frame).to_be_bytes());
        frame.extend(&head);
        frame.extend(crc32(&frame).to_be_bytes());
        let frames = decode(&frame, 3, 1000).unwrap();
        assert_eq!(frames[0].headers, vec![("s".to_owned(), "ok".to_owned())]);
    }

    #[test]
    fn rejects_bad_crcs_bad_headers_and_long_frames() {
        let good = encode(&[(":event-type", "messageStop")], b"{}");
        for at in [0, 9, 14, good.len() - 5, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            let e = decode(&bad, 4, 1000).unwrap_err();
            assert!(e.to_string().contains("CRC"), "byte {at}: {e}");
        }
        let e = decode(&good, 4, good.len() - 1).unwrap_err();
        assert!(matches!(e, LlmError::TooLarge { .. }), "{e:?}");
        // A frame that says it is longer than the limit fails on its prelude alone.
        assert!(decode(&good[..PRELUDE_BYTES], 12, 20).is_err());
        // A header of an unknown type, a header cut short, a headers length past the frame.
        for head in [
            vec![1, b'a', 12],
            vec![1, b'a', 7, 0, 9, b'x'],
            vec![5, b'a'],
        ] {
            let total = (PRELUDE_BYTES + head.len() + CRC_BYTES) as u32;
            let mut frame = total.to_be_bytes().to_vec();
            frame.extend((head.len() as u32).to_be_bytes());
            frame.extend(crc32(&frame).to_be_bytes());
            frame.extend(&head);
            frame.extend(crc32(&frame).to_be_bytes());
            let e = decode(&frame, 7, 1000).unwrap_err();
            assert!(matches!(e, LlmError::Decode { .. }), "{head:?}: {e:?}");
        }
        let mut frame = 16u32.to_be_bytes().to_vec();
        frame.extend(9u32.to_be_bytes());
        frame.extend(crc32(&frame).to_be_bytes());
        frame.extend(crc32(&frame).to_be_bytes());
        let e = decode(&frame, 7, 1000).unwrap_err();
        assert!(e.to_string().contains("headers are longer"), "{e}");
    }
}
