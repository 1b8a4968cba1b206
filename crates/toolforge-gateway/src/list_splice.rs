//! `tools/list` answers with their tool array spliced in from cached bytes.
//!
//! rmcp's `ListToolsResult` owns its `Tool`s, so answering a list of 10,000 tools through it
//! means cloning and serialising every definition per request. Instead, on `POST /mcp` the
//! guard gives a `tools/list` request a [`ListSlot`] (a request extension the handler finds in
//! the request's `http::request::Parts`). The handler puts the list's serialised tool array
//! in the slot (the bytes serde writes for rmcp's own `Vec<Tool>`, cached per catalog
//! generation and visibility scope) and answers rmcp with one placeholder tool whose name is the
//! cached answer's random marker. rmcp frames the answer as always (JSON or SSE, event ids,
//! `resultType`, `ttlMs`, `cacheScope`, `_meta`); the guard then replaces the placeholder
//! array (`[{"name":"toolforge-list-<marker>","inputSchema":{}}]`) in the response body with
//! the slot's bytes. The result is byte for byte what rmcp would have written for the full
//! list. A session's stream resumed with `Last-Event-ID` replays rmcp's cached events, the
//! placeholder among them: the guard finds the answer by its marker (while the cache keeps it)
//! and splices it in there too.
//!
//! Without a slot (stdio, or a request that did not pass the guard) the handler answers with
//! the full list as before.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Body as _, Frame, SizeHint};
use parking_lot::Mutex;
use rmcp::model::Tool as McpTool;

/// One splice: the placeholder array's bytes and the tool array that replaces them.
#[derive(Clone, Debug)]
pub(crate) struct Splice {
    pub(crate) needle: Bytes,
    pub(crate) tools: Bytes,
}

/// Where a `tools/list` handler leaves the splice of its answer.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListSlot(Arc<Mutex<Option<Splice>>>);

impl ListSlot {
    /// Leaves `splice` for the guard.
    pub(crate) fn fill(&self, splice: Splice) {
        *self.0.lock() = Some(splice);
    }

    fn take(&self) -> Option<Splice> {
        self.0.lock().take()
    }

    fn is_filled(&self) -> bool {
        self.0.lock().is_some()
    }
}

/// Finds the splice of a cached answer by its marker (for replayed events).
pub(crate) type Resolve = Arc<dyn Fn(&str) -> Option<Splice> + Send + Sync>;

const PREFIX: &str = "toolforge-list-";

/// A new random marker: no backend's tool can be mistaken for a placeholder.
pub(crate) fn new_marker() -> String {
    format!("{PREFIX}{}", uuid::Uuid::new_v4().simple())
}

/// The one tool a spliced answer carries through rmcp.
pub(crate) fn placeholder(marker: &str) -> McpTool {
    McpTool::new_with_raw(marker.to_owned(), None, Arc::default())
}

/// The bytes of the placeholder's tool array as rmcp serialises it.
pub(crate) fn needle(marker: &str) -> Bytes {
    serde_json::to_vec(&[placeholder(marker)]).map_or_else(|_| Bytes::new(), Bytes::from)
}

/// `haystack` with the first `needle` replaced by `tools`, as pieces that share their bytes:
/// the cached tool array (megabytes with thousands of tools) is not copied per answer. `None`
/// without a needle.
fn spliced(haystack: &Bytes, splice: &Splice) -> Option<Pieces> {
    let needle = &splice.needle[..];
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    let at = haystack.windows(needle.len()).position(|w| w == needle)?;
    Some(Pieces {
        chunks: [
            haystack.slice(..at),
            splice.tools.clone(),
            haystack.slice(at + needle.len()..),
        ],
        next: 0,
    })
}

/// A spliced answer's bytes in order: what came before the placeholder, the tool array, what
/// came after. A body of its own (exact length) and the frames a stream still owes.
#[derive(Debug, Default)]
struct Pieces {
    chunks: [Bytes; 3],
    /// The first chunk not handed out yet.
    next: usize,
}

impl Pieces {
    /// The next non-empty chunk.
    fn pop(&mut self) -> Option<Bytes> {
        while let Some(chunk) = self.chunks.get_mut(self.next) {
            self.next += 1;
            let chunk = std::mem::take(chunk);
            if !chunk.is_empty() {
                return Some(chunk);
            }
        }
        None
    }

    /// Bytes not handed out yet.
    fn remaining(&self) -> u64 {
        self.chunks
            .get(self.next..)
            .unwrap_or_default()
            .iter()
            .map(|c| c.len() as u64)
            .sum()
    }
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Poll::Ready(self.pop().map(|chunk| Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining())
    }
}

/// `hint` of a body that still owes `pending` bytes before it.
fn with_pending(hint: SizeHint, pending: &Pieces) -> SizeHint {
    let owed = pending.remaining();
    let mut total = SizeHint::new();
    total.set_lower(hint.lower().saturating_add(owed));
    if let Some(upper) = hint.upper() {
        total.set_upper(upper.saturating_add(owed));
    }
    total
}

/// The marker of the first placeholder in `haystack`.
fn marker_in(haystack: &[u8]) -> Option<&str> {
    let start = br#"[{"name":""#;
    let mut from = 0;
    while let Some(at) = haystack[from..]
        .windows(start.len())
        .position(|w| w == start)
    {
        let name = from + at + start.len();
        let rest = &haystack[name..];
        if rest.starts_with(PREFIX.as_bytes()) {
            let end = rest.iter().position(|&b| b == b'"')?;
            return std::str::from_utf8(&rest[..end]).ok();
        }
        from = name;
    }
    None
}

/// The response to a request that carried `slot`, with the handler's tool array spliced in.
/// A body of known length (a JSON answer, complete once rmcp has answered) is spliced here, so
/// its `Content-Length` stays right; a stream (SSE) is spliced as its event goes by.
pub(crate) async fn splice(response: Response, slot: ListSlot) -> Response {
    let exact = response.body().size_hint().exact().is_some();
    if exact {
        if !slot.is_filled() {
            return response;
        }
        let (parts, body) = response.into_parts();
        return match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => {
                let body = match slot.take().and_then(|splice| spliced(&bytes, &splice)) {
                    Some(pieces) => Body::new(pieces),
                    None => Body::from(bytes),
                };
                Response::from_parts(parts, body)
            }
            Err(e) => {
                tracing::warn!("tools/list: the answer could not be read for splicing: {e}");
                Response::from_parts(parts, Body::empty())
            }
        };
    }
    response.map(|body| {
        Body::new(Spliced {
            body,
            slot: Some(slot),
            pending: Pieces::default(),
        })
    })
}

/// A resumed stream (`Last-Event-ID`): each replayed placeholder gets its answer while the
/// cache keeps it.
pub(crate) fn replayed(response: Response, resolve: Resolve) -> Response {
    response.map(|body| {
        Body::new(Replayed {
            body,
            resolve,
            pending: Pieces::default(),
        })
    })
}

/// The next frame of a stream being spliced: first what `pending` still owes of a spliced
/// frame, then `body`'s next frame, its data replaced by the pieces `splice` makes of it.
fn poll_spliced(
    body: &mut Body,
    pending: &mut Pieces,
    cx: &mut Context<'_>,
    splice: impl FnOnce(&Bytes) -> Option<Pieces>,
) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
    if let Some(chunk) = pending.pop() {
        return Poll::Ready(Some(Ok(Frame::data(chunk))));
    }
    let frame = match Pin::new(body).poll_frame(cx) {
        Poll::Ready(Some(Ok(frame))) => frame,
        other => return other,
    };
    let data = match frame.into_data() {
        Ok(data) => data,
        Err(frame) => return Poll::Ready(Some(Ok(frame))),
    };
    let Some(pieces) = splice(&data) else {
        return Poll::Ready(Some(Ok(Frame::data(data))));
    };
    *pending = pieces;
    Poll::Ready(Some(Ok(Frame::data(pending.pop().unwrap_or_default()))))
}

/// A streamed answer whose placeholder array is replaced as the event carrying it goes by.
struct Spliced {
    body: Body,
    /// Until the splice is done.
    slot: Option<ListSlot>,
    /// The spliced event's chunks not sent yet.
    pending: Pieces,
}

impl http_body::Body for Spliced {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let slot = &mut this.slot;
        poll_spliced(&mut this.body, &mut this.pending, cx, |data| {
            let pieces = slot
                .as_ref()?
                .0
                .lock()
                .as_ref()
                .and_then(|splice| spliced(data, splice))?;
            // Done: the slot is emptied and the rest of the stream passes as it is.
            slot.take()?.take();
            Some(pieces)
        })
    }

    fn is_end_stream(&self) -> bool {
        self.pending.remaining() == 0 && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.slot.is_some() {
            // The length changes when the splice happens.
            SizeHint::default()
        } else {
            with_pending(self.body.size_hint(), &self.pending)
        }
    }
}

/// A resumed stream whose replayed placeholders are replaced (see [`replayed`]).
struct Replayed {
    body: Body,
    resolve: Resolve,
    /// The spliced event's chunks not sent yet.
    pending: Pieces,
}

impl http_body::Body for Replayed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let resolve = &this.resolve;
        // One event per frame, and one answer per event.
        poll_spliced(&mut this.body, &mut this.pending, cx, |data| {
            let splice = marker_in(data).and_then(|m| resolve(m))?;
            spliced(data, &splice)
        })
    }

    fn is_end_stream(&self) -> bool {
        self.pending.remaining() == 0 && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    const MARKER: &str = "toolforge-list-0123456789abcdef0123456789abcdef";

    fn tools_json() -> Bytes {
        Bytes::from_static(br#"[{"name":"a","inputSchema":{"type":"object"}}]"#)
    }

    fn splice_of(marker: &str) -> Splice {
        Splice {
            needle: needle(marker),
            tools: tools_json(),
        }
    }

    fn answer_with(tools: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"ttlMs":30000,"tools":{tools}}}}}"#)
    }

    fn placeholder_array(marker: &str) -> String {
        String::from_utf8(needle(marker).to_vec()).unwrap()
    }

    fn tools_text() -> String {
        String::from_utf8(tools_json().to_vec()).unwrap()
    }

    #[test]
    fn the_placeholder_serialises_to_the_needle() {
        let marker = new_marker();
        let needle = placeholder_array(&marker);
        assert_eq!(
            needle,
            format!(r#"[{{"name":"{marker}","inputSchema":{{}}}}]"#)
        );
        assert_eq!(
            marker_in(answer_with(&needle).as_bytes()),
            Some(&marker[..])
        );
        assert_ne!(new_marker(), marker);
    }

    #[test]
    fn a_tool_named_like_a_marker_elsewhere_is_no_placeholder() {
        let text = answer_with(r#"[{"name":"x"},{"name":"toolforge-list-1"}]"#);
        assert_eq!(marker_in(text.as_bytes()), None);
    }

    #[tokio::test]
    async fn a_json_answer_gets_the_tools_and_its_length() {
        let slot = ListSlot::default();
        slot.fill(splice_of(MARKER));
        let response = Response::new(Body::from(answer_with(&placeholder_array(MARKER))));
        let response = splice(response, slot).await;
        let expected = answer_with(&tools_text());
        assert_eq!(
            response.body().size_hint().exact(),
            Some(expected.len() as u64)
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, expected.as_bytes());
    }

    fn sse(events: Vec<String>) -> Body {
        let events: Vec<Result<Bytes, std::io::Error>> =
            events.into_iter().map(|e| Ok(Bytes::from(e))).collect();
        Body::from_stream(futures::stream::iter(events))
    }

    #[tokio::test]
    async fn an_sse_answer_gets_the_tools_in_its_event() {
        let slot = ListSlot::default();
        let body = sse(vec![
            "id: 0\nretry: 3000\ndata:\n\n".to_owned(),
            format!(
                "id: 1\ndata: {}\n\n",
                answer_with(&placeholder_array(MARKER))
            ),
        ]);
        let response = splice(Response::new(body), slot.clone()).await;
        // The handler fills the slot after the head went out, as on rmcp's session path.
        slot.fill(splice_of(MARKER));
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let expected = format!(
            "id: 0\nretry: 3000\ndata:\n\nid: 1\ndata: {}\n\n",
            answer_with(&tools_text())
        );
        assert_eq!(body, expected.as_bytes());
    }

    #[tokio::test]
    async fn a_replayed_answer_gets_the_tools_of_its_marker_only() {
        let body = sse(vec![
            format!(
                "id: 1\ndata: {}\n\n",
                answer_with(&placeholder_array(MARKER))
            ),
            format!(
                "id: 2\ndata: {}\n\n",
                answer_with(&placeholder_array("toolforge-list-gone"))
            ),
        ]);
        let resolve: Resolve = Arc::new(|m: &str| (m == MARKER).then(|| splice_of(MARKER)));
        let body = replayed(Response::new(body), resolve).into_body();
        let body = body.collect().await.unwrap().to_bytes();
        let expected = format!(
            "id: 1\ndata: {}\n\nid: 2\ndata: {}\n\n",
            answer_with(&tools_text()),
            answer_with(&placeholder_array("toolforge-list-gone"))
        );
        assert_eq!(body, expected.as_bytes());
    }

    #[tokio::test]
    async fn an_answer_without_a_filled_slot_is_left_alone() {
        let text = answer_with(&placeholder_array(MARKER));
        let response = splice(Response::new(Body::from(text.clone())), ListSlot::default()).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, text.as_bytes());
    }

    #[test]
    fn only_the_first_placeholder_is_replaced() {
        let twice = format!("{0}{0}", placeholder_array(MARKER));
        let splice = Splice {
            needle: needle(MARKER),
            tools: Bytes::from_static(b"[]"),
        };
        let mut pieces = spliced(&Bytes::from(twice), &splice).unwrap();
        let mut out = Vec::new();
        while let Some(chunk) = pieces.pop() {
            out.extend_from_slice(&chunk);
        }
        assert_eq!(out, format!("[]{}", placeholder_array(MARKER)).as_bytes());
    }

    #[test]
    fn the_tool_array_is_shared_not_copied() {
        let splice = splice_of(MARKER);
        let answer = Bytes::from(format!(
            r#"{{"result":{{"tools":{}}}}}"#,
            placeholder_array(MARKER)
        ));
        let mut pieces = spliced(&answer, &splice).unwrap();
        assert_eq!(
            pieces.remaining(),
            (answer.len() - splice.needle.len() + splice.tools.len()) as u64
        );
        let chunks: Vec<Bytes> = std::iter::from_fn(|| pieces.pop()).collect();
        assert_eq!(chunks.len(), 3, "{chunks:?}");
        assert_eq!(
            chunks[1].as_ptr(),
            splice.tools.as_ptr(),
            "the cached bytes themselves"
        );
        assert_eq!(
            chunks[0].as_ptr(),
            answer.as_ptr(),
            "a slice of the answer, not a copy"
        );
        assert_eq!(pieces.remaining(), 0);
    }
}
