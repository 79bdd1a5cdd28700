//! `helina bench square|relu|maxpool`: the arguments and the printing around
//! [`benchmarks::nonlinear`].

use benchmarks::nonlinear::{NonlinearOptions, Row, SquareOptions};
use clap::Args;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct SquareArgs {
    /// Number of values squared.
    #[arg(long, default_value_t = 2048)]
    count: usize,
    /// Parameter preset.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Runs (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn print(r: &Row, json: bool) -> Res<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "{} x{}: offline {:.1} ms, {:.3} MB; online {:.1} ms, {:.3} MB, {} round(s); setup (keys) {:.3} MB; AND gates {}; correct: {}",
        r.op,
        r.count,
        r.offline_ms,
        mb(r.bytes_offline),
        r.online_ms,
        mb(r.bytes_online),
        r.rounds_online,
        mb(r.bytes_setup),
        r.and_gates,
        r.correct
    );
    if let (Some(c), Some(b)) = (r.cots_per_element, r.bytes_per_element) {
        println!("  silent OT: {c:.1} COTs and {b:.1} bytes per element (setup = base OT + IKNP + first silent batches, once per session)");
    }
    if let Some([off, on, boff, bon]) = r.gazelle {
        println!(
            "  GAZELLE Table 10 ({} x{}): offline {off} ms, {boff} MB; online {on} ms, {bon} MB → helina/GAZELLE time: offline {:.2}, online {:.2}; bytes: online {:.2}",
            r.op,
            r.count,
            r.offline_ms / off.max(1e-9),
            r.online_ms / on,
            mb(r.bytes_online) / bon
        );
    }
    Ok(())
}

pub fn square(a: &SquareArgs) -> Res<()> {
    let r = benchmarks::nonlinear::square(&SquareOptions {
        count: a.count,
        params: a.params.clone(),
        reps: a.reps,
    })?;
    print(&r, a.json)?;
    if !r.correct {
        return Err("the reconstructed squares differ from y² mod p".into());
    }
    Ok(())
}

#[derive(Args)]
pub struct NonlinearBenchArgs {
    /// Number of outputs.
    #[arg(long, default_value_t = 10000)]
    count: usize,
    /// Truncation after the op (fractional bits f: floor division by 2^f).
    #[arg(long, default_value_t = 0)]
    truncate: u32,
    /// MaxPool window side k (k x k elements per output); ignored for relu.
    #[arg(long, default_value_t = 2)]
    window: usize,
    #[command(flatten)]
    nonlinear: crate::args::NonlinearArgs,
    /// With `--nonlinear ot`: approximate (Cheetah) truncation instead of faithful.
    #[arg(long)]
    approx_trunc: bool,
    /// Inputs within (−p/4, p/4), and with `--nonlinear ot` the layer told so (MaxPool
    /// comparisons without signs, a truncating DReLU on the high bits: as in a planned
    /// network, whose bound guarantees it).
    #[arg(long)]
    within_quarter: bool,
    /// With `--approx-trunc --within-quarter`: the coarse DReLU of this many bits (as
    /// a planned network's approximate steps may use; a ReLU may give 0 where
    /// `⌊y/2^f⌋ < 2^bits`).
    #[arg(long, default_value_t = 0)]
    coarse_drelu: u32,
    /// Parameter preset whose plaintext modulus p the shares live in.
    #[arg(long, default_value = "n8192")]
    params: String,
    /// Runs (the median is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// ReLU or MaxPool (with optional truncation) between two threads over loopback TCP.
pub fn nonlinear(a: &NonlinearBenchArgs, maxpool: bool) -> Res<()> {
    let protocol = a.nonlinear.protocol();
    let ot = protocol == protocol::NonlinearProtocol::SilentOt;
    let r = benchmarks::nonlinear::nonlinear(
        &NonlinearOptions {
            count: a.count,
            truncate: a.truncate,
            window: a.window,
            protocol,
            approx_trunc: a.approx_trunc,
            within_quarter: a.within_quarter,
            coarse_drelu_bits: a.coarse_drelu,
            params: a.params.clone(),
            reps: a.reps,
        },
        maxpool,
    )?;
    print(&r, a.json)?;
    if !a.json && !maxpool && a.count == 10000 {
        if ot {
            let mb = r.bytes_per_element.unwrap_or(0.0) * a.count as f64 / 1e6;
            println!(
                "  peer (SecretFlow SPU 0.9.5, Cheetah silent-OT ReLU, this machine kind): 0.096 s and 0.99 MB for 10000 ReLUs \u{2192} helina/SPU time (online) {:.2}, bytes (per element figure) {:.2}",
                r.online_ms / 96.0,
                mb / 0.99
            );
        } else {
            let mb = (r.bytes_offline + r.bytes_online) as f64 / 1e6;
            println!(
                "  peer (SecretFlow SPU 0.9.5, Cheetah silent-OT comparison, this machine kind): 0.096 s and 0.99 MB for 10000 ReLUs → helina/SPU time {:.2}, bytes {:.1}",
                (r.offline_ms + r.online_ms) / 96.0,
                mb / 0.99
            );
        }
    }
    if !r.correct {
        return Err(if ot {
            "the OT result differs from the plaintext reference"
        } else {
            "the garbled result differs from the plaintext reference"
        }
        .into());
    }
    Ok(())
}
