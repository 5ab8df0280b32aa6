//! The TCP sockets of data links: the listener neighbours dial and the connections a
//! node dials, opened with the congestion control the links ask for (`--tcp-congestion`,
//! `cubic` unless told otherwise). It is set before `listen` and `connect`: Linux lets a
//! socket switch algorithm later, but one that started under a pacing algorithm (BBR)
//! keeps pacing after the switch.
//!
//! Why not the host's default: where it is BBR, every link is paced at the rate BBR has
//! measured on it, and on a host whose processors the nodes share (a local cluster, a
//! machine of containers) that rate is measured while the receiver waits for a
//! processor. Paced links took 1.5x the time of unpaced ones on a 16-node all-to-all
//! (docs/PERFORMANCE-NOTES.md, "The links' congestion control").

use std::ffi::CString;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::str::FromStr;

use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// The congestion control data links ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Congestion {
    /// The host's default (`net.ipv4.tcp_congestion_control`), whatever it is.
    System,
    /// An algorithm by its kernel name (`cubic`, `reno`, `bbr`, ...).
    Named(String),
}

/// The algorithm links ask for unless told otherwise: Linux's own default, loss-based
/// and unpaced, as the cost model's links are.
pub const DEFAULT_CONGESTION: &str = "cubic";

/// Where Linux lists the algorithms it has loaded.
const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// Where Linux names the host's default.
const HOST_DEFAULT: &str = "/proc/sys/net/ipv4/tcp_congestion_control";

impl FromStr for Congestion {
    type Err = String;

    /// `system`, or an algorithm's name: at most 15 letters, digits and `_` (the kernel's
    /// limit), so a typo is refused on the command line, not at the first link.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "system" {
            return Ok(Congestion::System);
        }
        let valid =
            !text.is_empty() && text.len() <= 15 && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if valid {
            Ok(Congestion::Named(text.to_owned()))
        } else {
            Err(format!("`{text}` is not a congestion control's name (`system`, `cubic`, `reno`, `bbr`, ...)"))
        }
    }
}

impl std::fmt::Display for Congestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Congestion::System => f.write_str("system"),
            Congestion::Named(name) => f.write_str(name),
        }
    }
}

impl Congestion {
    /// What links run under when asked for `asked` (`None`: nothing asked, so
    /// [`DEFAULT_CONGESTION`]), checked on a throwaway socket. An algorithm the host has
    /// not loaded is an error when it was asked for by name; the default falls back to
    /// the host's own with a warning, as does any algorithm this process may not use (not
    /// in `net.ipv4.tcp_allowed_congestion_control`, without `CAP_NET_ADMIN`), so a node
    /// in a locked-down container still runs.
    pub fn for_links(asked: Option<Congestion>) -> anyhow::Result<Congestion> {
        let named = asked.is_some();
        let congestion = asked.unwrap_or_else(|| Congestion::Named(DEFAULT_CONGESTION.to_owned()));
        let Congestion::Named(name) = &congestion else { return Ok(congestion) };
        match congestion.apply(&TcpSocket::new_v4()?) {
            Ok(()) => Ok(congestion),
            Err(error) if named && error.raw_os_error() == Some(libc::ENOENT) => {
                let available = std::fs::read_to_string(AVAILABLE).unwrap_or_default();
                anyhow::bail!(
                    "TCP congestion control `{name}` is not available on this host (available: {}); \
                     --tcp-congestion system keeps the host's default",
                    available.trim()
                )
            }
            Err(error) => {
                tracing::warn!(congestion = %name, %error, host_default = host_default(), "links keep the host's congestion control");
                Ok(Congestion::System)
            }
        }
    }

    /// Sets the algorithm on a socket not yet connected or listening.
    #[allow(unsafe_code)] // setsockopt, the C interface to a socket's congestion control.
    fn apply<S: AsRawFd>(&self, socket: &S) -> io::Result<()> {
        let Congestion::Named(name) = self else { return Ok(()) };
        let name = CString::new(name.as_str()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let bytes = name.as_bytes();
        // SAFETY: the option value is `bytes`, valid for `bytes.len()` bytes for the call.
        let done = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                bytes.as_ptr().cast(),
                bytes.len() as libc::socklen_t,
            )
        };
        if done == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }

    /// A listener on `address` whose accepted links inherit the algorithm.
    pub fn listen(&self, address: SocketAddr) -> io::Result<TcpListener> {
        let socket = new_socket(address)?;
        socket.set_reuseaddr(true)?;
        self.apply(&socket)?;
        socket.bind(address)?;
        socket.listen(1024)
    }

    /// A connection to `address` (HOST:PORT, tried address by address as
    /// `TcpStream::connect` does) under the algorithm.
    pub async fn connect(&self, address: &str) -> io::Result<TcpStream> {
        let mut last_error = io::Error::new(io::ErrorKind::NotFound, format!("{address} resolves to no address"));
        for resolved in tokio::net::lookup_host(address).await? {
            let socket = new_socket(resolved)?;
            self.apply(&socket)?;
            match socket.connect(resolved).await {
                Ok(stream) => return Ok(stream),
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }
}

fn new_socket(address: SocketAddr) -> io::Result<TcpSocket> {
    if address.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }
}

/// The host's default algorithm, as Linux names it (empty if it cannot be read).
pub fn host_default() -> String {
    std::fs::read_to_string(HOST_DEFAULT).map(|name| name.trim().to_owned()).unwrap_or_default()
}

/// The algorithm a socket runs under.
#[allow(unsafe_code)] // getsockopt, the C interface to a socket's congestion control.
pub fn congestion_of<S: AsRawFd>(socket: &S) -> io::Result<String> {
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: `name` is writable for `len` bytes, and the kernel writes at most `len`.
    let done = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    let name = &name[..len as usize];
    Ok(String::from_utf8_lossy(name.split(|&b| b == 0).next().unwrap_or_default()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_typos_are_refused() {
        assert_eq!("system".parse::<Congestion>(), Ok(Congestion::System));
        assert_eq!("cubic".parse::<Congestion>(), Ok(Congestion::Named("cubic".into())));
        for bad in ["", "cu bic", "a-very-long-algorithm-name", "bbr;rm"] {
            assert!(bad.parse::<Congestion>().is_err(), "{bad:?} accepted");
        }
    }

    /// Both ends of a link run the algorithm asked for: the dialled socket, and the one
    /// the listener accepts.
    #[tokio::test]
    async fn both_ends_of_a_link_run_the_algorithm_asked_for() {
        // reno is built into every Linux kernel and always allowed.
        let reno = Congestion::for_links(Some(Congestion::Named("reno".into()))).unwrap();
        assert_eq!(reno, Congestion::Named("reno".into()));
        let listener = reno.listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (dialled, accepted) = tokio::join!(reno.connect(&address), listener.accept());
        assert_eq!(congestion_of(&dialled.unwrap()).unwrap(), "reno");
        assert_eq!(congestion_of(&accepted.unwrap().0).unwrap(), "reno");
    }

    #[tokio::test]
    async fn system_keeps_the_host_default() {
        let listener = Congestion::System.listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let dialled = Congestion::System.connect(&address).await.unwrap();
        assert_eq!(congestion_of(&dialled).unwrap(), host_default());
    }

    #[test]
    fn an_algorithm_the_host_lacks_is_an_error_that_names_what_it_has() {
        let error = Congestion::for_links(Some(Congestion::Named("nosuchcc".into()))).unwrap_err().to_string();
        assert!(error.contains("`nosuchcc` is not available"), "{error}");
        assert!(error.contains("reno"), "{error}");
    }

    #[test]
    fn nothing_asked_is_cubic_where_the_host_has_it() {
        let available = std::fs::read_to_string(AVAILABLE).unwrap();
        let expected = if available.split_whitespace().any(|name| name == DEFAULT_CONGESTION) {
            Congestion::Named(DEFAULT_CONGESTION.into())
        } else {
            Congestion::System
        };
        assert_eq!(Congestion::for_links(None).unwrap(), expected);
        assert_eq!(Congestion::for_links(Some(Congestion::System)).unwrap(), Congestion::System);
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_error() {
        assert!(Congestion::System.connect("127.0.0.1:1").await.is_err());
    }
}
