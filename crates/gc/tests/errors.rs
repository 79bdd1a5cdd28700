#![allow(clippy::unwrap_used)]
//! Malformed, short and mismatched messages give typed errors; fresh labels per run.

use std::time::Duration;

use gc::wire::{self, Choice, GarbledHeader};
use gc::{
    client_offline, client_online, run_local, server_offline, server_online, Garbler, GcError,
    NonlinSpec, Nonlinear,
};
use net::{Channel, Counters, Link, MemChannel, DEFAULT_MAX_FRAME};

type Edit = Box<dyn FnMut(Vec<u8>) -> Vec<u8> + Send>;

/// A channel that records received frames and rewrites the `at`-th one.
struct Tamper {
    inner: MemChannel,
    n: usize,
    at: usize,
    edit: Option<Edit>,
    log: Vec<Vec<u8>>,
}

impl Channel for Tamper {
    fn send(&mut self, frame: &[u8]) -> net::Result<()> {
        self.inner.send(frame)
    }
    fn recv(&mut self) -> net::Result<Vec<u8>> {
        let mut f = self.inner.recv()?;
        if self.n == self.at {
            if let Some(e) = self.edit.as_mut() {
                f = e(f);
            }
        }
        self.n += 1;
        self.log.push(f.clone());
        Ok(f)
    }
    fn counters(&self) -> Counters {
        self.inner.counters()
    }
}

fn tamper(inner: MemChannel, at: usize, edit: Option<Edit>) -> Tamper {
    Tamper {
        inner,
        n: 0,
        at,
        edit,
        log: Vec::new(),
    }
}

type Out = (Result<Vec<u64>, GcError>, Vec<Vec<u8>>);

#[allow(clippy::too_many_arguments)]
fn run_pair(
    spec_c: NonlinSpec,
    spec_s: NonlinSpec,
    garbler: Garbler,
    cli: Vec<u64>,
    srv: Vec<u64>,
    client_edit: Option<(usize, Edit)>,
    server_edit: Option<(usize, Edit)>,
) -> (Out, Out) {
    let (a, b) = MemChannel::pair(DEFAULT_MAX_FRAME, Duration::from_secs(20), Link::NONE);
    let (ca, ce) = client_edit.map_or((usize::MAX, None), |(i, e)| (i, Some(e)));
    let (sa, se) = server_edit.map_or((usize::MAX, None), |(i, e)| (i, Some(e)));
    let mut cch = tamper(a, ca, ce);
    let mut sch = tamper(b, sa, se);
    let hs = std::thread::spawn(move || {
        let r = server_offline(&mut sch, &spec_s, garbler)
            .and_then(|pre| server_online(&mut sch, pre, &srv));
        (r, std::mem::take(&mut sch.log))
    });
    let r = client_offline(&mut cch, &spec_c, garbler)
        .and_then(|pre| client_online(&mut cch, pre, &cli));
    let log = std::mem::take(&mut cch.log);
    drop(cch);
    ((r, log), hs.join().unwrap())
}

const P: u64 = 1032193;

fn relu(count: usize) -> NonlinSpec {
    NonlinSpec {
        p: P,
        op: Nonlinear::Relu,
        trunc_bits: 0,
        count,
    }
}

#[test]
fn count_mismatch() {
    let ((c, _), (s, _)) = run_pair(
        relu(10),
        relu(11),
        Garbler::Server,
        vec![0; 10],
        vec![0; 11],
        None,
        None,
    );
    assert!(
        matches!(
            c,
            Err(GcError::SpecMismatch {
                field: "count",
                ours: 10,
                theirs: 11
            })
        ),
        "{c:?}"
    );
    assert!(
        matches!(
            s,
            Err(GcError::SpecMismatch {
                field: "count",
                ours: 11,
                theirs: 10
            })
        ),
        "{s:?}"
    );
    let other = NonlinSpec {
        trunc_bits: 3,
        ..relu(10)
    };
    let ((c, _), _) = run_pair(
        relu(10),
        other,
        Garbler::Client,
        vec![0; 10],
        vec![0; 10],
        None,
        None,
    );
    assert!(
        matches!(
            c,
            Err(GcError::SpecMismatch {
                field: "trunc_bits",
                ..
            })
        ),
        "{c:?}"
    );
}

#[test]
fn role_mismatch() {
    let (a, b) = MemChannel::pair(DEFAULT_MAX_FRAME, Duration::from_secs(20), Link::NONE);
    let mut a = a;
    let mut b = b;
    let h =
        std::thread::spawn(move || server_offline(&mut b, &relu(3), Garbler::Client).map(|_| ()));
    let c = client_offline(&mut a, &relu(3), Garbler::Server);
    assert!(
        matches!(
            c,
            Err(GcError::SpecMismatch {
                field: "garbler",
                ours: 0,
                theirs: 1
            })
        ),
        "{c:?}"
    );
    drop(a);
    assert!(h.join().unwrap().is_err());
}

#[test]
fn wrong_share_lengths_and_ranges() {
    let spec = relu(4);
    let r = run_local(&spec, Garbler::Server, &[0; 3], &[0; 4]);
    assert!(
        matches!(
            r,
            Err(GcError::ShareCount {
                expected: 4,
                actual: 3
            })
        ),
        "{r:?}"
    );
    let r = run_local(&spec, Garbler::Server, &[0; 4], &[0; 5]);
    assert!(
        matches!(
            r,
            Err(GcError::ShareCount {
                expected: 4,
                actual: 5
            })
        ),
        "{r:?}"
    );
    let r = run_local(&spec, Garbler::Client, &[0; 5], &[0; 4]);
    assert!(
        matches!(
            r,
            Err(GcError::ShareCount {
                expected: 4,
                actual: 5
            })
        ),
        "{r:?}"
    );
    let r = run_local(&spec, Garbler::Client, &[0, 0, P, 0], &[0; 4]);
    assert!(
        matches!(
            r,
            Err(GcError::ShareOutOfRange {
                index: 2,
                value: P,
                p: P
            })
        ),
        "{r:?}"
    );
}

#[test]
fn invalid_specs() {
    for bad in [
        NonlinSpec {
            p: 1032194,
            ..relu(1)
        },
        NonlinSpec { p: 1, ..relu(1) },
        NonlinSpec {
            trunc_bits: 20,
            ..relu(1)
        },
        NonlinSpec {
            op: Nonlinear::MaxPool { window: 0 },
            ..relu(1)
        },
        NonlinSpec {
            p: (1 << 62) + 1,
            ..relu(1)
        },
    ] {
        let r = run_local(&bad, Garbler::Server, &[0], &[0]);
        assert!(matches!(r, Err(GcError::InvalidSpec(_))), "{bad:?}: {r:?}");
    }
}

// Frames the evaluator (client, server garbles) receives: 0 hello, 1 base-OT points,
// 2 garbled header, 3.. table frames (one for small layers), then the online labels.
const HELLO: usize = 0;
const POINTS: usize = 1;
const HEADER: usize = 2;
const TABLES: usize = 3;
const LABELS: usize = 4;

fn with_client_edit(at: usize, edit: Edit) -> Result<Vec<u64>, GcError> {
    let spec = relu(5);
    let ((c, _), (s, _)) = run_pair(
        spec,
        spec,
        Garbler::Server,
        vec![1; 5],
        vec![2; 5],
        Some((at, edit)),
        None,
    );
    // An evaluator that fails before the end leaves the garbler waiting for it; one
    // that decodes an output out of range fails after its last message, when the
    // garbler may have finished (a race, not an error).
    if at < LABELS && c.is_err() && !matches!(c, Err(GcError::OutputOutOfRange { .. })) {
        assert!(s.is_err(), "the garbler must notice the evaluator leaving");
    }
    c
}

#[test]
fn short_tables() {
    let r = with_client_edit(
        TABLES,
        Box::new(|mut f| {
            f.truncate(f.len() - 16);
            f
        }),
    );
    assert!(
        matches!(r, Err(GcError::Length { what: "garbled table frame (bytes)", expected, actual }) if actual + 16 == expected),
        "{r:?}"
    );
    let r = with_client_edit(
        TABLES,
        Box::new(|mut f| {
            f.truncate(7);
            f
        }),
    );
    assert!(matches!(r, Err(GcError::Length { actual: 7, .. })), "{r:?}");
}

#[test]
fn header_wrong_counts() {
    let r = with_client_edit(
        HEADER,
        Box::new(|f| {
            let mut h: GarbledHeader = wire::decode(&f, "t").unwrap();
            h.table_blocks -= 2;
            wire::encode(&h).unwrap()
        }),
    );
    assert!(
        matches!(
            r,
            Err(GcError::Length {
                what: "garbled table blocks",
                ..
            })
        ),
        "{r:?}"
    );
    let r = with_client_edit(
        HEADER,
        Box::new(|f| {
            let mut h: GarbledHeader = wire::decode(&f, "t").unwrap();
            h.mask_labels.truncate(h.mask_labels.len() - 1);
            wire::encode(&h).unwrap()
        }),
    );
    assert!(
        matches!(
            r,
            Err(GcError::Length {
                what: "mask label bytes",
                ..
            })
        ),
        "{r:?}"
    );
    let r = with_client_edit(
        HEADER,
        Box::new(|f| {
            let mut h: GarbledHeader = wire::decode(&f, "t").unwrap();
            h.decode.push(0);
            wire::encode(&h).unwrap()
        }),
    );
    assert!(
        matches!(
            r,
            Err(GcError::Length {
                what: "output decoding bytes",
                ..
            })
        ),
        "{r:?}"
    );
    let r = with_client_edit(
        HEADER,
        Box::new(|mut f| {
            f.truncate(f.len() / 2);
            f
        }),
    );
    assert!(
        matches!(
            r,
            Err(GcError::Decode {
                what: "garbled header",
                ..
            })
        ),
        "{r:?}"
    );
    let r = with_client_edit(
        HEADER,
        Box::new(|mut f| {
            f.push(0);
            f
        }),
    );
    assert!(
        matches!(
            r,
            Err(GcError::Decode {
                what: "garbled header",
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn bad_hello_points_labels() {
    let r = with_client_edit(
        HELLO,
        Box::new(|mut f| {
            f.truncate(3);
            f
        }),
    );
    assert!(
        matches!(r, Err(GcError::Decode { what: "hello", .. })),
        "{r:?}"
    );
    let r = with_client_edit(
        POINTS,
        Box::new(|mut f| {
            f.truncate(f.len() - 32);
            f
        }),
    );
    assert!(
        matches!(
            r,
            Err(GcError::Length {
                what: "base OT receiver points (bytes)",
                ..
            })
        ),
        "{r:?}"
    );
    let r = with_client_edit(
        POINTS,
        Box::new(|mut f| {
            f[32..64].fill(0xff);
            f
        }),
    );
    assert!(
        matches!(r, Err(GcError::InvalidPoint { index: 1 })),
        "{r:?}"
    );
    let r = with_client_edit(
        LABELS,
        Box::new(|mut f| {
            f.truncate(f.len() - 1);
            f
        }),
    );
    assert!(
        matches!(
            r,
            Err(GcError::Length {
                what: "online label frame (bytes)",
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn bad_choice_message() {
    // The garbler (server) receives: 0 hello, 1 base-OT point A, 2 IKNP columns, 3 choice.
    let spec = relu(5);
    let edit: Edit = Box::new(|f| {
        let mut c: Choice = wire::decode(&f, "t").unwrap();
        c.e.pop();
        wire::encode(&c).unwrap()
    });
    let (_, (s, _)) = run_pair(
        spec,
        spec,
        Garbler::Server,
        vec![1; 5],
        vec![2; 5],
        None,
        Some((3, edit)),
    );
    assert!(
        matches!(
            s,
            Err(GcError::Length {
                what: "choice bytes",
                ..
            })
        ),
        "{s:?}"
    );
    let edit: Edit = Box::new(|mut f| {
        f.truncate(f.len() - 1);
        f
    });
    let (_, (s, _)) = run_pair(
        spec,
        spec,
        Garbler::Server,
        vec![1; 5],
        vec![2; 5],
        None,
        Some((2, edit)),
    );
    assert!(
        matches!(
            s,
            Err(GcError::Length {
                what: "IKNP columns (bytes)",
                ..
            })
        ),
        "{s:?}"
    );
}

#[test]
fn fresh_labels_per_run() {
    let spec = relu(5);
    let run = || {
        let ((c, clog), (s, _)) = run_pair(
            spec,
            spec,
            Garbler::Server,
            vec![1; 5],
            vec![2; 5],
            None,
            None,
        );
        let (c, s) = (c.unwrap(), s.unwrap());
        let y: Vec<u64> = c.iter().zip(&s).map(|(a, b)| (a + b) % P).collect();
        assert_eq!(y, vec![3; 5]);
        clog
    };
    let (a, b) = (run(), run());
    assert_eq!(a.len(), b.len());
    assert_eq!(a[HELLO], b[HELLO]);
    for i in [POINTS, HEADER, TABLES, LABELS] {
        assert_eq!(a[i].len(), b[i].len());
        assert_ne!(a[i], b[i], "frame {i} repeated across runs");
    }
}

#[test]
fn corrupted_tables_never_panic() {
    for pos in [0usize, 17, 100, 1000] {
        let r = with_client_edit(
            TABLES,
            Box::new(move |mut f| {
                let i = pos % f.len();
                f[i] ^= 0x5a;
                f
            }),
        );
        // a corrupted table gives wrong shares or a typed error, never a panic
        if let Err(e) = r {
            assert!(matches!(e, GcError::OutputOutOfRange { .. }), "{e:?}");
        }
    }
}
