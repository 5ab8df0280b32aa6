//! Who may use the lab's page and API. Loopback by default; any other address only with
//! a token, which every API request carries as `Authorization: Bearer TOKEN` (the page
//! asks for it and keeps it in the tab's session storage, never in a URL). Every request
//! must name this server in its `Host` (a page of another site that resolves its own name
//! to this address, DNS rebinding, is refused), and a browser's request from another
//! origin (`Origin`, `Sec-Fetch-Site`) is refused, so no other site can drive runs.
//! Off loopback the token must be strong, by the rule `serve --listen` applies
//! (`topocomm_node::security::check_reachable_token`), and a source address that gives
//! wrong tokens is slowed ([`WrongTokens`]): past [`WRONG_TOKENS_ALLOWED`] in
//! [`WRONG_TOKEN_WINDOW`], its API requests are refused (429) until the window ends.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use topocomm_node::security::{TooWeakToReach, check_reachable_token};

/// Why a request was turned away; the text is what the client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the Host header {0:?} does not name this server (use the address the lab printed)")]
    Host(String),
    #[error("the request has no Host header")]
    NoHost,
    #[error("requests from another origin ({0}) are refused")]
    Origin(String),
    #[error("cross-site requests are refused")]
    CrossSite,
    #[error("this lab needs the cluster token (Authorization: Bearer TOKEN)")]
    Token,
}

/// Why the page cannot be served on an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NeedsToken {
    #[error(
        "the lab serves {0} only with a token: off loopback anyone who reaches the address could run on the \
         cluster; give --token-file FILE (or TOPOCOMM_TOKEN), or serve on 127.0.0.1"
    )]
    None(SocketAddr),
    /// The token given would fall to guessing.
    #[error(transparent)]
    Weak(#[from] TooWeakToReach),
}

/// The lab's access policy for the address it is bound to.
#[derive(Debug, Clone)]
pub struct Access {
    port: u16,
    /// The bound address, when it is not the unspecified one.
    bound: Option<IpAddr>,
    /// The token's hash, when the API needs one.
    token: Option<blake3::Hash>,
}

impl Access {
    /// The policy for a server bound to `bound`: a token is needed (and must be given)
    /// off loopback; on loopback none is asked.
    pub fn new(bound: SocketAddr, token: Option<&str>) -> Result<Self, NeedsToken> {
        let token = if bound.ip().is_loopback() {
            None
        } else {
            let token = token.filter(|t| !t.is_empty()).ok_or(NeedsToken::None(bound))?;
            check_reachable_token(token, "the lab's page", &bound.to_string())?;
            Some(blake3::hash(token.as_bytes()))
        };
        let bound_ip = (!bound.ip().is_unspecified()).then_some(bound.ip());
        Ok(Access { port: bound.port(), bound: bound_ip, token })
    }

    /// Whether API requests must carry the token.
    pub fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether `host` (a Host header: name or address, and port) names this server:
    /// its own port, and `localhost` or a loopback address, or the address it is bound
    /// to (any address literal when it is bound to all of them). Names other than
    /// `localhost` are refused: they are what DNS rebinding points at this server.
    pub fn host_allowed(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else { return false };
        if port != self.port {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let Ok(ip) = name.parse::<IpAddr>() else { return false };
        // Bound to every address (`bound` is `None`) only with a token: any literal then.
        ip.is_loopback() || self.bound.is_none_or(|bound| bound == ip)
    }

    /// Checks a request's `Host`, `Origin` and `Sec-Fetch-Site` headers, and, for the API
    /// (`api`), its `Authorization`.
    pub fn check(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        fetch_site: Option<&str>,
        authorization: Option<&str>,
        api: bool,
    ) -> Result<(), Refusal> {
        let host = host.ok_or(Refusal::NoHost)?;
        if !self.host_allowed(host) {
            return Err(Refusal::Host(host.to_owned()));
        }
        if let Some(origin) = origin
            && !origin.eq_ignore_ascii_case(&format!("http://{host}"))
        {
            return Err(Refusal::Origin(origin.to_owned()));
        }
        if fetch_site.is_some_and(|site| site.eq_ignore_ascii_case("cross-site")) {
            return Err(Refusal::CrossSite);
        }
        if let (true, Some(expected)) = (api, self.token) {
            let given = authorization.and_then(|value| value.strip_prefix("Bearer ")).unwrap_or("");
            // blake3::Hash compares in constant time.
            if blake3::hash(given.trim().as_bytes()) != expected {
                return Err(Refusal::Token);
            }
        }
        Ok(())
    }
}

/// Wrong tokens an address may give in [`WRONG_TOKEN_WINDOW`] before its API requests
/// are refused until the window ends.
pub const WRONG_TOKENS_ALLOWED: u32 = 10;

/// The window wrong tokens are counted in, from an address's first.
pub const WRONG_TOKEN_WINDOW: Duration = Duration::from_secs(60);

/// The most addresses whose wrong tokens are counted: past it the expired are forgotten,
/// then the oldest window.
const MOST_COUNTED: usize = 4096;

/// The address a connection counts against: its own, or an IPv6 address's /64 (one host
/// may hold a whole /64).
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !((1u128 << 64) - 1)))
        }
        IpAddr::V6(v6) => IpAddr::V4(v6.to_ipv4_mapped().expect("mapped")),
        v4 => v4,
    }
}

/// Wrong tokens by source address, each counted in a window from its first.
#[derive(Default)]
pub struct WrongTokens {
    counted: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl WrongTokens {
    /// `None` if `source` may try a token now, else how long until it may.
    pub fn wait_for(&self, source: IpAddr, now: Instant) -> Option<Duration> {
        let counted = self.counted.lock().expect("wrong tokens lock");
        let &(since, count) = counted.get(&source_of(source))?;
        let ends = since + WRONG_TOKEN_WINDOW;
        (count >= WRONG_TOKENS_ALLOWED && now < ends).then(|| ends - now)
    }

    /// Counts a wrong token from `source`.
    pub fn failed(&self, source: IpAddr, now: Instant) {
        let mut counted = self.counted.lock().expect("wrong tokens lock");
        let source = source_of(source);
        if !counted.contains_key(&source) && counted.len() >= MOST_COUNTED {
            counted.retain(|_, (since, _)| now.duration_since(*since) < WRONG_TOKEN_WINDOW);
            if counted.len() >= MOST_COUNTED
                && let Some(oldest) = counted.iter().min_by_key(|(_, (since, _))| *since).map(|(s, _)| *s)
            {
                counted.remove(&oldest);
            }
        }
        let entry = counted.entry(source).or_insert((now, 0));
        if now.duration_since(entry.0) >= WRONG_TOKEN_WINDOW {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.counted.lock().unwrap().len()
    }
}

/// `name:port` or `[v6]:port` → (name, port).
fn split_host(host: &str) -> Option<(&str, u16)> {
    let (name, port) = host.rsplit_once(':')?;
    let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    Some((name, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 128 bits in hex, as `openssl rand -hex 16` makes them.
    const STRONG: &str = "3f9a1c07d2e84b6a9c0e5f71b2d43a86";

    #[test]
    fn off_loopback_a_weak_token_is_refused_by_the_rule_serve_applies() {
        for weak in ["a", "s3cret", "topocomm-local-only"] {
            let error = Access::new("10.77.0.1:7780".parse().unwrap(), Some(weak)).unwrap_err().to_string();
            assert!(
                error.contains("too weak for the lab's page that other hosts can reach (10.77.0.1:7780)"),
                "{error}"
            );
            assert_eq!(error.lines().count(), 1, "{error}");
        }
        assert!(Access::new("127.0.0.1:7780".parse().unwrap(), Some("a")).is_ok(), "loopback asks no token");
    }

    #[test]
    fn wrong_tokens_past_the_allowance_make_their_address_wait_and_no_other() {
        let wrong = WrongTokens::default();
        let (one, other) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let start = Instant::now();
        for _ in 0..WRONG_TOKENS_ALLOWED {
            assert_eq!(wrong.wait_for(one, start), None);
            wrong.failed(one, start);
        }
        let wait = wrong.wait_for(one, start + Duration::from_secs(1)).expect("slowed");
        assert_eq!(wait, WRONG_TOKEN_WINDOW - Duration::from_secs(1));
        assert_eq!(wrong.wait_for(other, start), None, "another address is not slowed");
        assert_eq!(wrong.wait_for(one, start + WRONG_TOKEN_WINDOW), None, "the window ends");
        // An IPv6 host's whole /64 counts as one source.
        let (a, b): (IpAddr, IpAddr) = ("2001:db8::1".parse().unwrap(), "2001:db8::ffff:1".parse().unwrap());
        for _ in 0..WRONG_TOKENS_ALLOWED {
            wrong.failed(a, start);
        }
        assert!(wrong.wait_for(b, start).is_some());
        // The table is bounded.
        for n in 0..(MOST_COUNTED as u32 + 10) {
            wrong.failed(IpAddr::from(std::net::Ipv4Addr::from(0x0b00_0000 + n)), start);
        }
        assert!(wrong.len() <= MOST_COUNTED);
    }

    fn loopback() -> Access {
        Access::new("127.0.0.1:7780".parse().unwrap(), None).unwrap()
    }

    #[test]
    fn off_loopback_a_token_is_required() {
        let error = Access::new("0.0.0.0:7780".parse().unwrap(), None).unwrap_err();
        assert!(error.to_string().contains("only with a token"), "{error}");
        assert!(Access::new("192.168.1.5:7780".parse().unwrap(), Some("")).is_err());
        assert!(Access::new("192.168.1.5:7780".parse().unwrap(), Some(STRONG)).unwrap().needs_token());
        assert!(!loopback().needs_token());
        assert!(!Access::new("[::1]:7780".parse().unwrap(), None).unwrap().needs_token());
    }

    #[test]
    fn hosts_must_name_this_server() {
        let access = loopback();
        for host in ["127.0.0.1:7780", "localhost:7780", "LOCALHOST:7780", "[::1]:7780"] {
            assert!(access.host_allowed(host), "{host}");
        }
        for host in ["evil.example:7780", "127.0.0.1:80", "127.0.0.1", "192.168.1.5:7780", "", "localhost:x"] {
            assert!(!access.host_allowed(host), "{host}");
        }
        let everywhere = Access::new("0.0.0.0:7780".parse().unwrap(), Some(STRONG)).unwrap();
        assert!(everywhere.host_allowed("192.168.1.5:7780"));
        assert!(!everywhere.host_allowed("rebound.example:7780"));
        let one = Access::new("192.168.1.5:7780".parse().unwrap(), Some(STRONG)).unwrap();
        assert!(one.host_allowed("192.168.1.5:7780"));
        assert!(!one.host_allowed("192.168.1.6:7780"));
    }

    #[test]
    fn other_origins_and_cross_site_requests_are_refused() {
        let access = loopback();
        let host = Some("127.0.0.1:7780");
        assert_eq!(access.check(host, None, None, None, true), Ok(()));
        assert_eq!(access.check(host, Some("http://127.0.0.1:7780"), Some("same-origin"), None, true), Ok(()));
        assert_eq!(
            access.check(host, Some("http://evil.example"), None, None, true),
            Err(Refusal::Origin("http://evil.example".into()))
        );
        assert_eq!(access.check(host, Some("null"), None, None, true), Err(Refusal::Origin("null".into())));
        assert_eq!(access.check(host, None, Some("cross-site"), None, true), Err(Refusal::CrossSite));
        assert_eq!(access.check(None, None, None, None, false), Err(Refusal::NoHost));
        assert_eq!(
            access.check(Some("evil.example:7780"), None, None, None, false),
            Err(Refusal::Host("evil.example:7780".into()))
        );
    }

    #[test]
    fn the_api_needs_the_token_off_loopback_and_the_page_does_not() {
        let access = Access::new("0.0.0.0:7780".parse().unwrap(), Some(STRONG)).unwrap();
        let host = Some("10.0.0.2:7780");
        assert_eq!(access.check(host, None, None, None, false), Ok(()));
        assert_eq!(access.check(host, None, None, None, true), Err(Refusal::Token));
        assert_eq!(access.check(host, None, None, Some("Bearer wrong"), true), Err(Refusal::Token));
        assert_eq!(access.check(host, None, None, Some(STRONG), true), Err(Refusal::Token));
        assert_eq!(access.check(host, None, None, Some(&format!("Bearer {STRONG}")), true), Ok(()));
    }
}
