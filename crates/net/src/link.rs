//! Link emulation: each sent frame is delayed by its serialisation time at the given
//! bandwidth plus half the round-trip time (one flight), so a request/response round
//! costs one RTT plus the bytes' transfer time.

use std::time::Duration;

use crate::error::{NetError, Result};

/// An emulated link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// Bits per second (`None`: unlimited).
    pub bandwidth_bps: Option<f64>,
    /// Round-trip time.
    pub rtt: Duration,
}

impl Link {
    /// No emulation.
    pub const NONE: Link = Link {
        bandwidth_bps: None,
        rtt: Duration::ZERO,
    };

    /// Named presets matching the papers' settings:
    /// `gala-lan` (1 Gbit/s), `gala-wan` (200 Mbit/s, 13 ms RTT), `heliks` (100 MB/s =
    /// 800 Mbit/s), `none`.
    pub fn preset(name: &str) -> Result<Link> {
        let mbit = |m: f64| Some(m * 1e6);
        match name {
            "none" => Ok(Link::NONE),
            "gala-lan" => Ok(Link {
                bandwidth_bps: mbit(1000.0),
                rtt: Duration::ZERO,
            }),
            "gala-wan" => Ok(Link {
                bandwidth_bps: mbit(200.0),
                rtt: Duration::from_millis(13),
            }),
            "heliks" => Ok(Link {
                bandwidth_bps: mbit(800.0),
                rtt: Duration::ZERO,
            }),
            _ => Err(NetError::BadLink {
                given: name.to_string(),
                why: "unknown preset (none, gala-lan, gala-wan, heliks)",
            }),
        }
    }

    /// A custom link from `--bandwidth 100mbit` (kbit, mbit, gbit; or bytes: kb, mb, gb
    /// per second) and `--rtt 13ms` (ms, us, s).
    pub fn custom(bandwidth: &str, rtt: &str) -> Result<Link> {
        let bad = |why| NetError::BadLink {
            given: format!("{bandwidth} / {rtt}"),
            why,
        };
        let split = |s: &str| {
            let i = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            (s[..i].parse::<f64>().ok(), s[i..].to_ascii_lowercase())
        };
        let (v, unit) = split(bandwidth.trim());
        let v = v
            .filter(|v| *v > 0.0)
            .ok_or(bad("bandwidth must be a positive number"))?;
        let bps = match unit.as_str() {
            "kbit" => v * 1e3,
            "mbit" => v * 1e6,
            "gbit" => v * 1e9,
            "kb" => v * 8e3,
            "mb" => v * 8e6,
            "gb" => v * 8e9,
            _ => return Err(bad("bandwidth unit: kbit, mbit, gbit, kb, mb or gb")),
        };
        let (r, unit) = split(rtt.trim());
        let r = r.filter(|r| *r >= 0.0).ok_or(bad("rtt must be a number"))?;
        let rtt = match unit.as_str() {
            "ms" => Duration::from_secs_f64(r / 1e3),
            "us" => Duration::from_secs_f64(r / 1e6),
            "s" => Duration::from_secs_f64(r),
            _ => return Err(bad("rtt unit: ms, us or s")),
        };
        Ok(Link {
            bandwidth_bps: Some(bps),
            rtt,
        })
    }

    /// The delay one frame of `bytes` bytes suffers on this link.
    pub fn delay(&self, bytes: usize) -> Duration {
        let wire = self
            .bandwidth_bps
            .map(|b| Duration::from_secs_f64(bytes as f64 * 8.0 / b))
            .unwrap_or(Duration::ZERO);
        wire + self.rtt / 2
    }
}
