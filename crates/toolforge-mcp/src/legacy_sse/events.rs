//! Server-sent events read from a byte stream, each bounded in size (the WHATWG
//! `text/event-stream` format: `event:`, `data:`, `id:` and `retry:` fields, comments, lines
//! ended by LF, CRLF or CR, an event dispatched at a blank line).

/// One event: its type (`message` when the stream names none) and its data lines joined by LF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub kind: String,
    pub data: String,
}

/// An event (or a line) longer than the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server sent an event of more than {0} bytes")]
pub(crate) struct TooLarge(pub usize);

/// Turns chunks of the stream into events.
#[derive(Debug)]
pub(crate) struct Parser {
    max: usize,
    /// The line being read (its end not seen yet).
    line: Vec<u8>,
    /// The previous chunk ended with CR: an LF opening this one ends nothing more.
    after_cr: bool,
    kind: Option<String>,
    data: Option<String>,
}

impl Parser {
    /// A parser that refuses events (and lines) of more than `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            after_cr: false,
            kind: None,
            data: None,
        }
    }

    /// The events `chunk` completes, in order.
    ///
    /// # Errors
    /// An event or a line runs past the bound; the stream is then unusable.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, TooLarge> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..end]);
            self.check()?;
            let cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            if cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.line_ended(&line) {
                events.push(event);
            }
        }
        self.line.extend_from_slice(rest);
        self.check()?;
        Ok(events)
    }

    fn size(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    fn check(&self) -> Result<(), TooLarge> {
        if self.size() > self.max {
            return Err(TooLarge(self.max));
        }
        Ok(())
    }

    fn line_ended(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            let data = self.data.take();
            let kind = self.kind.take();
            return data.map(|data| Event {
                kind: kind
                    .filter(|k| !k.is_empty())
                    .unwrap_or_else(|| "message".to_owned()),
                data,
            });
        }
        if line.first() == Some(&b':') {
            return None; // a comment (keep-alive)
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.kind = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            // `id` and `retry` steer a browser's reconnection; the legacy transport has none.
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(parser: &mut Parser, chunks: &[&[u8]]) -> Vec<Event> {
        chunks
            .iter()
            .flat_map(|c| parser.feed(c).expect("within the bound"))
            .collect()
    }

    fn event(kind: &str, data: &str) -> Event {
        Event {
            kind: kind.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_are_read_whatever_the_line_ends_and_chunk_boundaries() {
        let text = b": ping\r\nevent: endpoint\r\ndata: /messages?sessionId=1\r\n\r\n\
                     data: {\"a\":1}\n\nevent: message\rdata: x\rdata: y\r\r";
        let whole = all(&mut Parser::new(1024), &[text]);
        let expected = vec![
            event("endpoint", "/messages?sessionId=1"),
            event("message", "{\"a\":1}"),
            event("message", "x\ny"),
        ];
        assert_eq!(whole, expected);
        // Every split point, a CR and its LF in different chunks included.
        for at in 0..text.len() {
            let mut parser = Parser::new(1024);
            let split = all(&mut parser, &[&text[..at], &text[at..]]);
            assert_eq!(split, expected, "split at {at}");
        }
    }

    #[test]
    fn a_blank_line_without_data_dispatches_nothing() {
        let got = all(&mut Parser::new(64), &[b"event: endpoint\n\n\n: c\n\n"]);
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn an_event_past_the_bound_is_refused_even_when_it_comes_in_pieces() {
        let mut parser = Parser::new(16);
        assert!(parser.feed(b"data: 0123456").unwrap().is_empty());
        assert_eq!(parser.feed(b"789abcdef"), Err(TooLarge(16)));
        // Data lines count together: 5 bytes kept, then a line of 11.
        let mut lines = Parser::new(15);
        assert!(lines.feed(b"data: 01234\n").unwrap().is_empty());
        assert_eq!(lines.feed(b"data: 56789\n"), Err(TooLarge(15)));
        // The bound is per event: many small events pass.
        let mut small = Parser::new(16);
        for _ in 0..100 {
            assert_eq!(small.feed(b"data: 0123456\n\n").unwrap().len(), 1);
        }
    }
}
