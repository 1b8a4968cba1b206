//! `-t stdio|sse|http`: how a built-in server is served (seed 001: every server takes a
//! transport flag). `--stdio` and `--port` keep their meaning: `--stdio` is `-t stdio`, a
//! `--port` alone is `-t http` on it.

/// A built-in server's transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportArg {
    /// One session on stdin/stdout.
    Stdio,
    /// HTTP, announced for legacy clients: `GET /sse` and `POST /messages` (2024-11-05).
    Sse,
    /// HTTP, announced for Streamable HTTP clients: `/mcp`.
    #[value(alias = "streamable-http")]
    Http,
}

/// The port `-t sse|http` serves on without `--port`.
pub const DEFAULT_PORT: u16 = 8000;

/// How to serve, from the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serve {
    Stdio,
    /// HTTP on `port`: `/mcp`, `/sse` with `/messages`, and `GET /tools`, whichever transport
    /// was named (it decides only which endpoint is announced first).
    Http {
        port: u16,
        named: TransportArg,
    },
}

/// The flags every built-in server shares.
#[derive(Debug, Clone, clap::Args)]
pub struct TransportArgs {
    /// Transport: `stdio` (the default), `sse` (the legacy HTTP+SSE transport at /sse) or
    /// `http` (Streamable HTTP at /mcp). Over HTTP every endpoint is served: /mcp, /sse with
    /// /messages, and GET /tools.
    #[arg(short = 't', long = "transport", value_enum, value_name = "TRANSPORT")]
    pub transport: Option<TransportArg>,
    /// Serve over stdin/stdout (as `-t stdio`).
    #[arg(long, conflicts_with = "port")]
    pub stdio: bool,
    /// Serve HTTP on this port (0 picks a free one); alone, as `-t http`.
    #[arg(long)]
    pub port: Option<u16>,
}

impl TransportArgs {
    /// What the flags ask for.
    ///
    /// # Errors
    /// Flags that contradict each other.
    pub fn serve(&self) -> anyhow::Result<Serve> {
        match (self.transport, self.stdio, self.port) {
            (None | Some(TransportArg::Stdio), _, None) => Ok(Serve::Stdio),
            (None, false, Some(port)) => Ok(Serve::Http {
                port,
                named: TransportArg::Http,
            }),
            (Some(TransportArg::Stdio), _, Some(_)) | (None, true, Some(_)) => anyhow::bail!(
                "--port is for an HTTP transport; give `-t sse` or `-t http` with it, or drop it for stdio"
            ),
            (Some(named), true, _) => anyhow::bail!(
                "--stdio contradicts `-t {}`; give one of them",
                clap::ValueEnum::to_possible_value(&named)
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default()
            ),
            (Some(named), false, port) => Ok(Serve::Http {
                port: port.unwrap_or(DEFAULT_PORT),
                named,
            }),
        }
    }
}

/// The line a built-in server prints once it listens on `addr`.
#[must_use]
pub fn listening_line(server: &str, addr: std::net::SocketAddr, named: TransportArg) -> String {
    let sse = format!("http://{addr}/sse (legacy HTTP+SSE)");
    let mcp = format!("http://{addr}/mcp (Streamable HTTP)");
    let (first, second) = match named {
        TransportArg::Sse => (sse, mcp),
        _ => (mcp, sse),
    };
    format!("{server} listening on {first}, {second}, GET http://{addr}/tools")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(transport: Option<TransportArg>, stdio: bool, port: Option<u16>) -> TransportArgs {
        TransportArgs {
            transport,
            stdio,
            port,
        }
    }

    #[test]
    fn the_transport_flag_and_the_old_flags_agree() {
        use TransportArg::{Http, Sse, Stdio};
        assert_eq!(args(None, false, None).serve().unwrap(), Serve::Stdio);
        assert_eq!(args(None, true, None).serve().unwrap(), Serve::Stdio);
        assert_eq!(
            args(Some(Stdio), false, None).serve().unwrap(),
            Serve::Stdio
        );
        assert_eq!(
            args(None, false, Some(9)).serve().unwrap(),
            Serve::Http {
                port: 9,
                named: Http
            }
        );
        assert_eq!(
            args(Some(Sse), false, None).serve().unwrap(),
            Serve::Http {
                port: DEFAULT_PORT,
                named: Sse
            }
        );
        assert_eq!(
            args(Some(Http), false, Some(0)).serve().unwrap(),
            Serve::Http {
                port: 0,
                named: Http
            }
        );
        for bad in [
            args(Some(Stdio), false, Some(9)),
            args(Some(Sse), true, None),
            args(Some(Http), true, Some(1)),
        ] {
            assert!(bad.serve().is_err(), "{bad:?}");
        }
    }
}
