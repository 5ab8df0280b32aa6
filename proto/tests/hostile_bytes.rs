//! Every decoder of bytes from strangers (frame headers, handshake messages, control
//! messages) against hostile input: arbitrary bytes, mutated valid encodings and huge
//! length prefixes decode to an error or to a value that round-trips, never panic, and
//! never allocate more than the codec's decode limit. The stable-toolchain fallback of the
//! cargo-fuzz targets in `fuzz/`; with `FUZZ_SEED_DIR` set, `write_fuzz_seeds` also writes
//! their seed corpora.

// A counting allocator over the system's, to bound what decoding allocates.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use proptest::prelude::*;
use serde::{Serialize, de::DeserializeOwned};
use topocomm_proto::auth::{self, Answer, Challenge, Hello, Key, Purpose, Verdict};
use topocomm_proto::codec::{self, DECODE_LIMIT};
use topocomm_proto::control::{
    ClientRequest, ClientResponse, ClusterStatus, Neighbour, NodeDump, NodeReport, NodeTrace, RegisteredNode,
    RunLimits, RunOutcome, RunRequest, RunTrace, SetupTimes, ToCoordinator, ToNode, TopologySpec, Wiring,
};
use topocomm_proto::flow::{FlowEvent, FlowKind};
use topocomm_proto::frame::{Frame, FrameHeader};
use topocomm_proto::network::Placement;
use topocomm_proto::spec::{Algorithm, Collective, LinkModel, Ports, Routing, RunSpec};
use topocomm_proto::topology::TopologyKind;

/// The system allocator, noting the largest single allocation each thread asks for (so a
/// test can tell how much a hostile length prefix made a decoder reserve).
struct Tracking;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// Runs `f` and returns what it returned and the largest single allocation it made.
fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.with(|largest| largest.set(0));
    let result = f();
    (result, LARGEST.with(Cell::get))
}

/// Each decoder that reads bytes from strangers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoder {
    FrameHeader,
    FrameParse,
    Hello,
    Challenge,
    Answer,
    Verdict,
    ToCoordinator,
    ToNode,
    ClientRequest,
    ClientResponse,
    Wiring,
}

const DECODERS: [Decoder; 11] = [
    Decoder::FrameHeader,
    Decoder::FrameParse,
    Decoder::Hello,
    Decoder::Challenge,
    Decoder::Answer,
    Decoder::Verdict,
    Decoder::ToCoordinator,
    Decoder::ToNode,
    Decoder::ClientRequest,
    Decoder::ClientResponse,
    Decoder::Wiring,
];

/// What a decoder made of some bytes.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Refused,
    Accepted,
}

/// Decodes `bytes` as a handshake message; if it decodes, checks that it re-encodes to
/// exactly `bytes` and decodes again to an equal value.
fn handshake<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Outcome {
    match auth::decode::<T>(bytes) {
        Err(_) => Outcome::Refused,
        Ok(value) => {
            assert!(bytes.len() <= auth::MAX_HANDSHAKE_MESSAGE, "a {}-byte handshake message decoded", bytes.len());
            let again = auth::encode(&value).unwrap();
            assert_eq!(again, bytes, "{value:?} came from bytes other than its encoding");
            assert_eq!(auth::decode::<T>(&again).unwrap(), value);
            Outcome::Accepted
        }
    }
}

/// As `handshake`, for control messages (which may hold NaNs: those compare by encoding).
fn control<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Outcome {
    match codec::decode::<T>(bytes) {
        Err(_) => Outcome::Refused,
        Ok(value) => {
            let again = codec::encode(&value).unwrap();
            assert_eq!(again, bytes, "{value:?} came from bytes other than its encoding");
            let twice = codec::decode::<T>(&again).unwrap();
            #[allow(clippy::eq_op)]
            if value == value {
                assert_eq!(twice, value);
            } else {
                assert_eq!(codec::encode(&twice).unwrap(), again);
            }
            Outcome::Accepted
        }
    }
}

/// Text a log would show for `text`: must hold no control character.
fn check_shown(text: &str) {
    let shown = auth::shown(text);
    assert!(!shown.chars().any(char::is_control), "shown({text:?}) = {shown:?}");
}

impl Decoder {
    /// Decodes `bytes` and checks the outcome: refused, or accepted and round-tripping.
    /// Panics (so fails the test) on any broken property, and on a decode that allocates
    /// more than the codec's decode limit.
    fn check(self, bytes: &[u8]) -> Outcome {
        let (outcome, largest) = largest_allocation(|| self.decode(bytes));
        assert!(largest <= DECODE_LIMIT, "{self:?} allocated {largest} bytes at once decoding {} bytes", bytes.len());
        outcome
    }

    fn decode(self, bytes: &[u8]) -> Outcome {
        match self {
            Decoder::FrameHeader => match FrameHeader::decode(bytes) {
                Err(_) => Outcome::Refused,
                Ok(header) => {
                    assert_eq!(header.encode(), bytes, "{header:?}");
                    Outcome::Accepted
                }
            },
            Decoder::FrameParse => match Frame::parse(Bytes::copy_from_slice(bytes)) {
                Err(_) => Outcome::Refused,
                Ok(frame) => {
                    assert_eq!(frame.header.encode(), &bytes[..FrameHeader::ENCODED_LEN]);
                    assert_eq!(&frame.payload[..], &bytes[FrameHeader::ENCODED_LEN..]);
                    Outcome::Accepted
                }
            },
            Decoder::Hello => {
                let outcome = handshake::<Hello>(bytes);
                if let Ok(Hello { purpose: Purpose::Node { name, data_addr, .. }, .. }) = auth::decode::<Hello>(bytes) {
                    for (text, checked) in
                        [(&name, auth::check_name(&name)), (&data_addr, auth::check_address(&data_addr))]
                    {
                        check_shown(text);
                        match checked {
                            Ok(()) => assert!(text.bytes().all(|b| b.is_ascii_graphic()), "accepted {text:?}"),
                            Err(error) => assert!(!error.to_string().chars().any(char::is_control), "{error}"),
                        }
                    }
                }
                outcome
            }
            Decoder::Challenge => {
                if let Ok(Challenge::Refused(reason)) = auth::decode::<Challenge>(bytes) {
                    check_shown(&reason);
                }
                handshake::<Challenge>(bytes)
            }
            Decoder::Answer => handshake::<Answer>(bytes),
            Decoder::Verdict => handshake::<Verdict>(bytes),
            Decoder::ToCoordinator => control::<ToCoordinator>(bytes),
            Decoder::ToNode => control::<ToNode>(bytes),
            Decoder::ClientRequest => control::<ClientRequest>(bytes),
            Decoder::ClientResponse => control::<ClientResponse>(bytes),
            Decoder::Wiring => control::<Wiring>(bytes),
        }
    }

    /// Valid encodings of sample messages for this decoder.
    fn samples(self) -> Vec<Vec<u8>> {
        let auth = |m: &dyn erased::Encode| m.auth();
        let ctl = |m: &dyn erased::Encode| m.control();
        match self {
            Decoder::FrameHeader => vec![header().encode().to_vec()],
            Decoder::FrameParse => {
                let mut body = header().encode().to_vec();
                body.extend_from_slice(b"payload bytes");
                vec![header().encode().to_vec(), body]
            }
            Decoder::Hello => vec![auth(&node_hello()), auth(&link_hello()), auth(&client_hello())],
            Decoder::Challenge => vec![
                auth(&Challenge::Proceed { nonce: [3; 32], proof: [4; 32] }),
                auth(&Challenge::Refused("wrong version".into())),
            ],
            Decoder::Answer => vec![auth(&Answer { proof: [5; 32] })],
            Decoder::Verdict => vec![auth(&Verdict::Welcome), auth(&Verdict::Refused("no such link".into()))],
            Decoder::ToCoordinator => vec![
                ctl(&ToCoordinator::Wired { epoch: 2 }),
                ctl(&ToCoordinator::WireFailed {
                    epoch: 2,
                    reason: "refused".into(),
                    unreachable: vec![1],
                    missing: vec![3],
                }),
                ctl(&ToCoordinator::Report(Box::new(report()))),
                ctl(&ToCoordinator::Pong),
                ctl(&ToCoordinator::ClockReply { nonce: 9, node_ns: 123_456 }),
            ],
            Decoder::ToNode => vec![
                ctl(&ToNode::Wire(wiring())),
                ctl(&ToNode::Start {
                    spec: Box::new(spec()),
                    limits: Box::new(RunLimits {
                        footprint_bytes: 1 << 20,
                        delivered: vec![4096; 4],
                        forwarded: vec![0, 512, 512, 0],
                        counted: true,
                    }),
                }),
                ctl(&ToNode::Abort { run: 4 }),
                ctl(&ToNode::Refused { reason: "cluster full".into() }),
                ctl(&ToNode::ClockProbe { nonce: 1 }),
                ctl(&ToNode::Ping),
            ],
            Decoder::ClientRequest => vec![
                ctl(&ClientRequest::Run(Box::new(RunRequest {
                    topology: TopologyKind::Torus,
                    dims: Some(vec![2, 2]),
                    routes: None,
                    placement: Placement::Linear,
                    spec: spec(),
                }))),
                ctl(&ClientRequest::Status),
            ],
            Decoder::ClientResponse => vec![
                ctl(&ClientResponse::RunDone(Box::new(RunOutcome {
                    spec: spec(),
                    topology: topology(),
                    reports: vec![report(), NodeReport::empty(4, 1)],
                    trace: Some(RunTrace { events: vec![event()], clock_error_us: vec![0.5, 1.25] }),
                    setup: SetupTimes { ready_ms: 1.5, wiring_ms: Some(20.25) },
                }))),
                ctl(&ClientResponse::Status(ClusterStatus {
                    expected: 4,
                    registered: vec![RegisteredNode {
                        id: Some(0),
                        name: "node-0".into(),
                        data_addr: "10.0.0.1:7000".into(),
                    }],
                    topology: Some(topology()),
                })),
                ctl(&ClientResponse::Error("no nodes".into())),
            ],
            Decoder::Wiring => vec![ctl(&wiring())],
        }
    }

    /// The name of this decoder's fuzz target and the byte that selects it there.
    fn fuzz_target(self) -> (&'static str, Option<u8>) {
        match self {
            Decoder::FrameHeader | Decoder::FrameParse => ("frame_header", None),
            Decoder::Hello => ("handshake", Some(0)),
            Decoder::Challenge => ("handshake", Some(1)),
            Decoder::Answer => ("handshake", Some(2)),
            Decoder::Verdict => ("handshake", Some(3)),
            Decoder::ToCoordinator => ("control", Some(0)),
            Decoder::ToNode => ("control", Some(1)),
            Decoder::ClientRequest => ("control", Some(2)),
            Decoder::ClientResponse => ("control", Some(3)),
            Decoder::Wiring => ("control", Some(4)),
        }
    }
}

/// Encoding through `&dyn`, so one list can hold samples of different types.
mod erased {
    pub trait Encode {
        fn auth(&self) -> Vec<u8>;
        fn control(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Encode for T {
        fn auth(&self) -> Vec<u8> {
            topocomm_proto::auth::encode(self).unwrap()
        }
        fn control(&self) -> Vec<u8> {
            topocomm_proto::codec::encode(self).unwrap()
        }
    }
}

fn header() -> FrameHeader {
    FrameHeader { run: 9, iteration: 3, src: 1, dst: 6, tag: 42, hops: 2, step: 1, packet: 0, last: true, due_ns: 7 }
}

fn node_hello() -> Hello {
    Hello {
        version: 2,
        purpose: Purpose::Node { name: "node-07".into(), data_addr: "10.0.0.7:7000".into(), memory_bytes: 1 << 33 },
        nonce: [7; 32],
        encrypted: false,
    }
}

fn link_hello() -> Hello {
    Hello { version: 2, purpose: Purpose::Link { epoch: 3, from: 1, to: 2 }, nonce: [8; 32], encrypted: true }
}

fn client_hello() -> Hello {
    Hello { version: 2, purpose: Purpose::Client, nonce: [9; 32], encrypted: false }
}

fn topology() -> TopologySpec {
    TopologySpec { kind: TopologyKind::Torus, p: 4, dims: vec![2, 2], routes: None, placement: Placement::Linear }
}

fn wiring() -> Wiring {
    Wiring {
        epoch: 2,
        id: 0,
        topology: topology(),
        neighbours: vec![
            Neighbour { id: 1, address: "10.0.0.2:7000".into(), key: Key::from_token("one") },
            Neighbour { id: 2, address: "[::1]:7001".into(), key: Key::from_token("two") },
        ],
        link_within_ms: 15_000,
    }
}

fn spec() -> RunSpec {
    RunSpec {
        size_bytes: 64,
        emulation: Some(LinkModel {
            ts_ns: 1000,
            th_ns: 100,
            tw_ps: 10_000,
            routing: Routing::Ct,
            packet_bytes: 1024,
            ports: Ports::All,
        }),
        clock_offsets_ns: vec![0, -5, 12],
        ..RunSpec::new(Collective::Allreduce, Algorithm::Ring)
    }
}

fn event() -> FlowEvent {
    FlowEvent {
        at_ns: 10,
        node: 1,
        kind: FlowKind::Forward,
        run: 4,
        iteration: 0,
        src: 0,
        dst: 2,
        tag: 1,
        step: 1,
        hops: 1,
        bytes: 64,
        next: Some(2),
    }
}

fn report() -> NodeReport {
    NodeReport {
        times_us: vec![12.5, f64::NAN, 3.0],
        verified: true,
        mismatch: Some("element 3".into()),
        link_bytes: vec![(1, 64), (2, 128)],
        dump: Some(NodeDump { input: Bytes::from_static(&[1, 2, 3]), output: Bytes::from_static(&[4, 5]) }),
        trace: Some(NodeTrace { origin_ns: 5, events: vec![event()] }),
        ..NodeReport::empty(4, 0)
    }
}

/// Lengths a hostile peer may write into a length prefix.
const HUGE: [u64; 8] =
    [u64::MAX, 1 << 40, 300 << 20, DECODE_LIMIT as u64, DECODE_LIMIT as u64 + 1, 1 << 32, u32::MAX as u64, 1 << 20];

/// One change to a valid encoding.
#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: usize,
        mask: u8,
    },
    Truncate {
        at: usize,
    },
    Extend(Vec<u8>),
    /// A huge length written over the `nth` 8-byte window that held a value no larger
    /// than the encoding (as every length prefix of a valid encoding does).
    Length {
        nth: usize,
        value: u64,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        proptest::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
        (any::<usize>(), prop_oneof![proptest::sample::select(HUGE.to_vec()), any::<u64>()])
            .prop_map(|(nth, value)| Mutation::Length { nth, value }),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    match mutation {
        Mutation::Flip { at, mask } if !bytes.is_empty() => {
            let at = at % bytes.len();
            bytes[at] ^= mask;
        }
        Mutation::Flip { .. } => {}
        Mutation::Truncate { at } => bytes.truncate(at % (bytes.len() + 1)),
        Mutation::Extend(more) => bytes.extend_from_slice(more),
        Mutation::Length { nth, value } => {
            let windows: Vec<usize> =
                (0..bytes.len().saturating_sub(7)).filter(|&i| read_u64(bytes, i) <= bytes.len() as u64).collect();
            if let Some(&at) = windows.get(nth % windows.len().max(1)) {
                bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
            }
        }
    }
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

fn decoder() -> impl Strategy<Value = Decoder> {
    proptest::sample::select(DECODERS.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_are_refused_or_round_trip(decoder in decoder(), bytes in proptest::collection::vec(any::<u8>(), 0..8192)) {
        decoder.check(&bytes);
        // The first bytes alone, too: long inputs mostly fail on trailing bytes.
        decoder.check(&bytes[..bytes.len().min(64)]);
    }

    #[test]
    fn mutated_encodings_are_refused_or_round_trip(
        decoder in decoder(),
        pick in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let samples = decoder.samples();
        let mut bytes = samples[pick % samples.len()].clone();
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        decoder.check(&bytes);
    }
}

#[test]
fn every_sample_is_accepted() {
    for decoder in DECODERS {
        for sample in decoder.samples() {
            assert_eq!(decoder.check(&sample), Outcome::Accepted, "{decoder:?} refused its own sample");
            // A frame's payload may be any length; everything else must be whole.
            let cut = decoder.check(&sample[..sample.len() - 1]);
            let whole = decoder != Decoder::FrameParse || sample.len() == FrameHeader::ENCODED_LEN;
            assert_eq!(cut == Outcome::Refused, whole, "{decoder:?} made {cut:?} of a cut sample");
        }
    }
}

/// `node_hello()` with its name's length prefix (just after version and purpose variant)
/// replaced by `len`, and the bytes that follow left as they were.
fn hello_with_name_length(len: u64) -> Vec<u8> {
    let mut bytes = auth::encode(&node_hello()).unwrap();
    assert_eq!(read_u64(&bytes, 8), "node-07".len() as u64, "the name's length prefix has moved");
    bytes[8..16].copy_from_slice(&len.to_le_bytes());
    bytes
}

#[test]
fn a_hello_name_of_u64_max_bytes_is_refused_without_allocating() {
    let bytes = hello_with_name_length(u64::MAX);
    let (decoded, largest) = largest_allocation(|| auth::decode::<Hello>(&bytes));
    assert!(decoded.is_err(), "{decoded:?}");
    assert!(largest < 4096, "allocated {largest} bytes at once");
    assert_eq!(Decoder::Hello.check(&bytes), Outcome::Refused);
}

#[test]
fn a_hello_name_of_300_mib_is_refused() {
    let bytes = hello_with_name_length(300 << 20);
    assert!(bytes.len() < auth::MAX_HANDSHAKE_MESSAGE);
    assert!(auth::decode::<Hello>(&bytes).is_err());
    assert_eq!(Decoder::Hello.check(&bytes), Outcome::Refused);
}

/// A handshake message is at most `MAX_HANDSHAKE_MESSAGE` bytes, read before the peer is
/// authenticated, so decoding one costs no more than that: bincode's limit follows the
/// input's size (`codec::decode_prefix`), so a claimed length beyond it is refused before
/// anything is reserved (before that fix, a 300 MiB claim reserved 300 MiB).
#[test]
fn a_hostile_hello_allocates_no_more_than_a_handshake_message() {
    for len in [300 << 20, DECODE_LIMIT as u64 - 64, 1 << 20] {
        let bytes = hello_with_name_length(len);
        let (decoded, largest) = largest_allocation(|| auth::decode::<Hello>(&bytes));
        assert!(decoded.is_err());
        assert!(largest <= auth::MAX_HANDSHAKE_MESSAGE, "a {len}-byte name allocated {largest} bytes at once");
    }
}

#[test]
fn a_wiring_of_2_pow_40_neighbours_is_refused_without_allocating() {
    let wire = ToNode::Wire(wiring());
    let mut bytes = codec::encode(&wire).unwrap();
    // Variant, epoch, id, then the topology (kind, p, dims, no route policy: one byte,
    // placement: its name's length and its name), then the neighbours' count.
    let placement = topology().placement.to_string().len();
    let at = 4 + 8 + 8 + 4 + 8 + 8 + 8 * topology().dims.len() + 1 + 8 + placement;
    assert_eq!(read_u64(&bytes, at), 2, "the neighbours' length prefix has moved");
    bytes[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let (decoded, largest) = largest_allocation(|| codec::decode::<ToNode>(&bytes));
    assert!(decoded.is_err(), "{decoded:?}");
    assert!(largest <= 1 << 20, "allocated {largest} bytes at once");
    assert_eq!(Decoder::ToNode.check(&bytes), Outcome::Refused);
}

#[test]
fn an_oversized_handshake_message_is_refused() {
    let mut bytes = auth::encode(&Challenge::Refused("x".repeat(auth::MAX_HANDSHAKE_MESSAGE))).unwrap();
    assert!(codec::decode::<Challenge>(&bytes).is_ok(), "the codec alone takes it");
    assert_eq!(Decoder::Challenge.check(&bytes), Outcome::Refused);
    bytes.truncate(auth::MAX_HANDSHAKE_MESSAGE);
    assert_eq!(Decoder::Challenge.check(&bytes), Outcome::Refused);
}

/// Writes the samples into `$FUZZ_SEED_DIR/<target>/` (e.g. `fuzz/corpus`), each
/// prefixed with its target's selector byte; does nothing without `FUZZ_SEED_DIR`.
#[test]
fn write_fuzz_seeds() {
    let Some(dir) = std::env::var_os("FUZZ_SEED_DIR") else { return };
    let dir = std::path::PathBuf::from(dir);
    let mut written = 0;
    for decoder in DECODERS {
        let (target, selector) = decoder.fuzz_target();
        std::fs::create_dir_all(dir.join(target)).unwrap();
        for (i, sample) in decoder.samples().into_iter().enumerate() {
            let seed: Vec<u8> = selector.into_iter().chain(sample).collect();
            std::fs::write(dir.join(target).join(format!("seed-{decoder:?}-{i}")), seed).unwrap();
            written += 1;
        }
    }
    assert!(written >= DECODERS.len());
}
