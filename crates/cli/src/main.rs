//! `helina`: private neural-network inference with packed BFV and secret sharing.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Keeps freed memory mapped instead of returning it to the OS after mimalloc's purge
/// delay. Encoding weights per query and every HE operation allocate and free
/// polynomials of 64 KiB to 512 KiB; with purging, their pages are decommitted and
/// faulted in again, and on virtual machines a first touch costs about 3 ms per MiB
/// (measured here: `helina bench conv --input 14x14x1024 --filters 256x1x1 --method
/// cheetah` encodes its 6,656 filter plaintexts in 4.0 s with purging, 0.8 s without).
/// Peak memory is unchanged; memory freed by one layer is reused by the next. A
/// `MIMALLOC_PURGE_DELAY` in the environment (mimalloc reads it itself) is left to win.
#[cfg(feature = "mimalloc")]
#[allow(unsafe_code)]
fn keep_freed_memory() {
    // mimalloc's `mi_option_purge_delay`: index 15 of `mi_option_e` in the v3
    // `include/mimalloc.h` that libmimalloc-sys =0.1.49 builds (counting
    // `mi_option_show_errors` as 0; `MIMALLOC_VERBOSE=1` lists the options in this
    // order). libmimalloc-sys exports no constant for it. −1 = never purge, the same
    // as `MIMALLOC_PURGE_DELAY=-1` (`MIMALLOC_SHOW_STATS=1` then reports 0 purged).
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: mi_option_set stores one integer in mimalloc's option table; it is called
    // once at the start of main, before any other thread exists.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

mod args;
mod bench_conv;
mod bench_linear;
mod bench_matvec;
mod bench_network;
mod bench_nonlinear;
mod bench_ops;
mod bench_serve;
mod compile;
mod demo;
mod infer;
mod inspect;
mod plan;
mod samples;
mod tls_certs;
mod twoparty;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "helina",
    version,
    about = "HE linear algebra for private inference"
)]
struct Cli {
    /// More log output on stderr (-v: info, -vv: debug, -vvv: trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Worker threads for the HE kernels (default: all cores). Results are identical
    /// for any count.
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// A server and a client over loopback TCP for the sample matvec and conv layers,
    /// every method; results checked against the plaintext reference.
    Demo(demo::DemoArgs),
    /// Private inference of a whole network (ONNX, or a built-in one), client and
    /// server over loopback TCP, checked against the plaintext fixed-point reference.
    Infer(infer::InferArgs),
    /// What helina makes of a model: the imported graph, the fixed point (scales, p),
    /// its agreement with the float model, the input range and the method per layer.
    Inspect(inspect::InspectArgs),
    /// Per linear layer of a network: every method's predicted time and bytes, and the
    /// pick.
    Plan(plan::PlanArgs),
    /// Plan an ONNX model once and save it (`.helina`): a server loads it without
    /// calibration data.
    Compile(compile::CompileArgs),
    /// Write a built-in network as ONNX (seeded public weights), or list them.
    Export(ExportArgs),
    /// Serve linear layers to clients over TCP (concurrent sessions).
    Server(twoparty::ServerArgs),
    /// Query a `helina server` with a private input.
    Client(twoparty::ClientArgs),
    /// Write a throwaway CA with a server and a client certificate (for trying TLS).
    TlsCerts(tls_certs::TlsCertsArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(clap::Args)]
struct ExportArgs {
    /// The built-in network.
    #[arg(long, required_unless_present = "list")]
    net: Option<String>,
    /// Output file.
    #[arg(long, required_unless_present = "list")]
    out: Option<std::path::PathBuf>,
    /// Seed of the weights.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// List the built-in networks.
    #[arg(long)]
    list: bool,
}

fn export(a: &ExportArgs) -> Result<(), Box<dyn std::error::Error>> {
    if a.list {
        for (name, shape, what) in nn::zoo::NETS {
            println!("{name:<18} input {shape:?}  {what}");
        }
        return Ok(());
    }
    let (Some(net), Some(out)) = (&a.net, &a.out) else {
        return Err("give --net NAME --out m.onnx (or --list)".into());
    };
    let bytes = nn::zoo::onnx(net, a.seed)
        .ok_or_else(|| format!("unknown network `{net}` (see `helina export --list`)"))?;
    std::fs::write(out, &bytes).map_err(|e| format!("{}: {e}", out.display()))?;
    eprintln!(
        "{net}: {} bytes of ONNX written to {}",
        bytes.len(),
        out.display()
    );
    Ok(())
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Median time of every HE operation the kernels use, plain fhe.rs next to helina's
    /// faster variant.
    Ops(bench_ops::OpsArgs),
    /// Matrix-vector kernels side by side on the same W and x.
    Matvec(bench_matvec::MatvecArgs),
    /// Convolution kernels side by side on the same image and filters.
    Conv(bench_conv::ConvArgs),
    /// GAZELLE's interactive Square over loopback TCP.
    Square(bench_nonlinear::SquareArgs),
    /// ReLU (with optional truncation) over loopback TCP: silent OT, or `--nonlinear gc`.
    Relu(bench_nonlinear::NonlinearBenchArgs),
    /// MaxPool over k x k windows over loopback TCP: silent OT, or `--nonlinear gc`.
    Maxpool(bench_nonlinear::NonlinearBenchArgs),
    /// Every layer of a network: per-layer time, bytes and op counts by method, totals
    /// (bfv: run for real; count: op counts and predictions only).
    Network(bench_network::NetworkArgs),
    /// A `helina server` process under several clients at once, round after round, over
    /// TCP or TLS: inferences/s, latency per inference (p50/p99), failures by cause, the
    /// server's memory (start, peak, end of each round) and CPU time.
    #[command(alias = "load")]
    Serve(bench_serve::ServeBenchArgs),
}

fn main() {
    #[cfg(feature = "mimalloc")]
    keep_freed_memory();
    let cli = Cli::parse();
    let level = ["warn", "info", "debug", "trace"][usize::from(cli.verbose.min(3))];
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    if let Some(n) = cli.threads {
        if let Err(e) = rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build_global()
        {
            eprintln!("error: --threads {n}: {e}");
            std::process::exit(1);
        }
    }
    let result = match cli.cmd {
        Cmd::Demo(a) => demo::run(&a),
        Cmd::Infer(a) => infer::run(&a),
        Cmd::Inspect(a) => inspect::run(&a),
        Cmd::Plan(a) => plan::run(&a),
        Cmd::Export(a) => export(&a),
        Cmd::Server(a) => twoparty::server(&a),
        Cmd::Client(a) => twoparty::client(&a),
        Cmd::TlsCerts(a) => tls_certs::run(&a),
        Cmd::Compile(a) => compile::run(&a),
        Cmd::Bench { what } => match what {
            BenchCmd::Ops(a) => bench_ops::run(&a),
            BenchCmd::Matvec(a) => bench_matvec::run(&a),
            BenchCmd::Conv(a) => bench_conv::run(&a),
            BenchCmd::Square(a) => bench_nonlinear::square(&a),
            BenchCmd::Relu(a) => bench_nonlinear::nonlinear(&a, false),
            BenchCmd::Maxpool(a) => bench_nonlinear::nonlinear(&a, true),
            BenchCmd::Network(a) => bench_network::run(&a),
            BenchCmd::Serve(a) => bench_serve::run(&a),
        },
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
