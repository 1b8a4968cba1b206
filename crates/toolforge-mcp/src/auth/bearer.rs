//! [`Bearer`]: an rmcp Streamable HTTP client that puts its credentials' token on every request
//! and reacts to the server's refusals.
//!
//! A request the server refused with 401 or with 403 `insufficient_scope` did not run, so it
//! may be sent again: the credentials are asked for a token to resend it with (a refreshed
//! one, or one of a new grant with the scope asked for), at most [`MAX_RESENDS`] times. When
//! they have none, the refusal goes back to the caller with the server's challenge (rmcp's
//! `AuthRequired` or `InsufficientScope`), which the pool turns into a consent request.
//!
//! rmcp's own `AuthClient` does the same around its `AuthorizationManager`; this one takes any
//! [`TokenSource`], because the pool's tokens come from a store per principal, from a token
//! exchange or from client credentials, and a lone client's from a flow it runs itself.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::SseError;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::token::{AccessToken, AuthFailure, Challenge, Credentials, Refusal};

/// How many times one request is sent again after a refusal.
pub const MAX_RESENDS: usize = 3;

/// An HTTP client with credentials (or none: then every request goes as it is).
#[derive(Clone)]
pub struct Bearer<C> {
    inner: C,
    credentials: Option<Credentials>,
}

impl<C> std::fmt::Debug for Bearer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bearer")
            .field("credentials", &self.credentials.is_some())
            .finish_non_exhaustive()
    }
}

impl<C> Bearer<C> {
    /// `inner`, with no credentials.
    pub fn plain(inner: C) -> Self {
        Self {
            inner,
            credentials: None,
        }
    }

    /// `inner`, sending the tokens of `credentials`.
    pub fn new(inner: C, credentials: Credentials) -> Self {
        Self {
            inner,
            credentials: Some(credentials),
        }
    }
}

fn failure<E: std::error::Error + Send + Sync + 'static>(e: AuthFailure) -> StreamableHttpError<E> {
    use rmcp::transport::auth::AuthError;
    StreamableHttpError::Auth(match e {
        AuthFailure::AuthorizationRequired => AuthError::AuthorizationRequired,
        AuthFailure::Failed(message) => AuthError::AuthorizationFailed(message),
    })
}

impl<C: StreamableHttpClient + Sync> Bearer<C> {
    /// Runs `send` with the credentials' token, sending it again after a refusal while they
    /// give a new token.
    async fn authorized<T, F, Fut>(
        &self,
        credentials: &Credentials,
        send: F,
    ) -> Result<T, StreamableHttpError<C::Error>>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<C::Error>>>,
    {
        let mut token = credentials.token().await.map_err(failure)?;
        let mut resends = 0;
        loop {
            let header = token.as_ref().map(|t| t.expose().to_owned());
            let error = match send(header).await {
                Err(e) => e,
                ok => return ok,
            };
            let (refusal, www_authenticate) = match &error {
                StreamableHttpError::AuthRequired(e) => {
                    (Refusal::Unauthorized, e.www_authenticate_header.clone())
                }
                StreamableHttpError::InsufficientScope(e) => (
                    Refusal::InsufficientScope,
                    e.www_authenticate_header.clone(),
                ),
                _ => return Err(error),
            };
            if refusal == Refusal::InsufficientScope
                && super::token::param(&www_authenticate, "error").as_deref()
                    != Some("insufficient_scope")
            {
                return Err(error); // a plain 403: no scope would change it
            }
            if resends == MAX_RESENDS {
                return Err(error);
            }
            resends += 1;
            let challenge = Challenge {
                refusal,
                www_authenticate,
                sent: token.clone(),
            };
            match credentials.refused(&challenge).await {
                Ok(Some(fresh)) => token = Some(fresh),
                Ok(None) => return Err(error),
                Err(AuthFailure::AuthorizationRequired) => return Err(error),
                Err(e) => return Err(failure(e)),
            }
        }
    }
}

/// The token as the header value rmcp's client sends (`Bearer <token>` is added by it).
fn header_of(token: Option<&AccessToken>) -> Option<String> {
    token.map(|t| t.expose().to_owned())
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Bearer<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let Some(credentials) = &self.credentials else {
            return self
                .inner
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await;
        };
        self.authorized(credentials, |token| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let Some(credentials) = &self.credentials else {
            return self
                .inner
                .delete_session(uri, session_id, auth_header, custom_headers)
                .await;
        };
        // A session's end is not worth a new grant: the current token, or none.
        let token = credentials.token().await.ok().flatten();
        self.inner
            .delete_session(uri, session_id, header_of(token.as_ref()), custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let Some(credentials) = &self.credentials else {
            return self
                .inner
                .get_stream_with_max_sse_event_size(
                    uri,
                    session_id,
                    last_event_id,
                    auth_header,
                    custom_headers,
                    max_sse_event_size,
                )
                .await;
        };
        self.authorized(credentials, |token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

/// The HTTP client of a Streamable HTTP backend: the pool's keep-alive reqwest client, with the
/// connection's credentials when the server has `"auth"`.
pub(crate) type BackendHttp = Bearer<reqwest::Client>;
