//! The planner: each objective picks its own minimum among the candidates, encoding on
//! the fly adds the predicted encoding time, Galois keys are priced over a finite link,
//! threads divide only the work a layer can spread; and a server with a memory budget
//! of zero (every layer encoded on the fly) still returns the fixed-point reference bit
//! for bit.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use he::Params;
use kernels::{ConvShape, Padding};
use net::{Link, MemChannel};
use protocol::{infer, MethodChoice, NetworkPlan, NetworkServer};
use protocol::{Candidate, LayerShape, Objective, Planner};
use rand::{Rng, SeedableRng};

fn conv() -> LayerShape {
    LayerShape::Conv(ConvShape {
        c_i: 4,
        h: 16,
        w: 16,
        c_o: 4,
        k_h: 3,
        k_w: 3,
        stride: 1,
        padding: Padding::Same,
    })
}

fn bytes(c: &Candidate, key_bytes: u64) -> f64 {
    let e = c.estimate.as_ref().unwrap();
    (e.bytes_up + e.bytes_down + e.galois_keys as u64 * key_bytes) as f64
}

#[test]
fn each_objective_picks_its_own_minimum() {
    let params = Params::preset("n8192").unwrap();
    let link = Link::preset("gala-wan").unwrap();
    for shape in [
        conv(),
        LayerShape::Matvec {
            rows: 64,
            cols: 512,
        },
    ] {
        let mut planner = Planner::new(&params, &link);
        let kb = planner.model.galois_key_bytes;
        let (pick, cands) = planner.choose(&shape, &params, false).unwrap();
        let ok: Vec<&Candidate> = cands.iter().filter(|c| c.estimate.is_ok()).collect();
        assert!(ok.len() >= 3, "{shape:?}");
        let fastest = ok
            .iter()
            .min_by(|a, b| a.predicted_ms.total_cmp(&b.predicted_ms))
            .unwrap();
        assert_eq!(pick.method(), fastest.method);

        planner.objective = Objective::Bytes;
        let (pick, _) = planner.choose(&shape, &params, false).unwrap();
        let smallest = ok
            .iter()
            .min_by(|a, b| bytes(a, kb).total_cmp(&bytes(b, kb)))
            .unwrap();
        let picked = ok.iter().find(|c| c.method == pick.method()).unwrap();
        assert_eq!(bytes(picked, kb), bytes(smallest, kb));

        planner.objective = Objective::Balanced;
        let (pick, _) = planner.choose(&shape, &params, false).unwrap();
        let min_ms = fastest.predicted_ms;
        let min_b = bytes(smallest, kb);
        let score = |c: &Candidate| c.predicted_ms / min_ms + bytes(c, kb) / min_b;
        let best = ok.iter().map(|c| score(c)).fold(f64::INFINITY, f64::min);
        let picked = ok.iter().find(|c| c.method == pick.method()).unwrap();
        assert_eq!(score(picked), best);
    }
    assert!("fastest".parse::<Objective>().is_err());
    assert_eq!("bytes".parse::<Objective>().unwrap(), Objective::Bytes);
}

#[test]
fn prediction_adds_keys_encoding_and_divides_by_usable_threads() {
    let params = Params::preset("n8192").unwrap();
    let link = Link::preset("gala-wan").unwrap();
    let planner = Planner::new(&params, &link);
    let (_, cands) = planner.choose(&conv(), &params, false).unwrap();
    let c = cands.iter().find(|c| c.method.name() == "gala").unwrap();
    let e = c.estimate.as_ref().unwrap();
    assert!(e.galois_keys > 0 && e.plaintexts > 0);
    assert_eq!(
        e.encoded_bytes,
        e.plaintexts * (params.n() * params.levels() * 8) as u64
    );
    // Independent sum: server (held: reading its plaintexts from memory included) +
    // transfer (bytes / bandwidth) + one RTT + keys.
    let bw = link.bandwidth_bps.unwrap() / 8.0;
    let rtt = link.rtt.as_secs_f64() * 1e3;
    let keys = (e.galois_keys as u64 * planner.model.galois_key_bytes) as f64 / bw * 1e3;
    let read = e.encoded_bytes as f64 / 1e6 * planner.model.held_read_us_per_mb() / 1e3;
    assert!(read > 0.0);
    assert!((e.held_products_ms - read).abs() < 1e-9 * read);
    let want = e.server_ms
        + read
        + e.client_ms
        + (e.bytes_up + e.bytes_down) as f64 / bw * 1e3
        + rtt
        + keys;
    assert!(e.client_ms > 0.0);
    assert!((c.predicted_ms - want).abs() < 1e-6 * want);
    // per query: the encoding instead of the reading
    let fly = planner.predicted_ms(e, 1, true);
    assert!((fly - (want - read) - e.encode_ms).abs() < 1e-6 * want);
    assert!(e.encode_ms > 0.0);

    let mut two = planner.clone();
    two.threads = 2;
    let halved = want - (e.server_ms + read + e.client_ms) / 2.0;
    assert!((two.predicted_ms(e, 4, false) - halved).abs() < 1e-6 * want);
    // One independent unit: a second thread does not help.
    assert!((two.predicted_ms(e, 1, false) - want).abs() < 1e-6 * want);
}

#[test]
fn a_zero_memory_budget_encodes_every_layer_on_the_fly_with_the_same_result() {
    let network = nn::import_bytes(&nn::zoo::onnx("mnist-d", 1).unwrap()).unwrap();
    let mut r = rand::rngs::StdRng::seed_from_u64(3);
    let xs: Vec<Vec<f32>> = vec![(0..784).map(|_| r.random_range(0.0..1.0)).collect()];
    let calibration: Vec<Vec<f32>> = (0..4)
        .map(|_| (0..784).map(|_| r.random_range(0.0..1.0)).collect())
        .collect();
    let prog =
        nn::choose_fixed_point(&network, &calibration, &nn::FixedPointOptions::default()).unwrap();
    let params = Params::preset(&prog.preset).unwrap();
    let xq: Vec<Vec<i64>> = xs.iter().map(|x| nn::quantise_input(&prog, x)).collect();
    let (mut c, mut s) = MemChannel::pair(1 << 30, Duration::from_secs(300), Link::NONE);
    let (sp, sprog) = (params.clone(), prog.clone());
    let server = std::thread::spawn(move || {
        let planner = protocol::Planner::new(&sp, &Link::NONE);
        let plan = NetworkPlan::new(sprog, &sp, &planner, Some(0), &MethodChoice::Auto, None)?;
        NetworkServer::new(&plan, protocol::NonlinearProtocol::default())?.serve(&mut s)
    });
    let out = infer(&mut c, Some(&params), &xs, &mut |_, _| {}).unwrap();
    let srv = server.join().unwrap().unwrap();
    assert_eq!(
        out.outputs[0].value.as_ref().unwrap(),
        &nn::run_fixed(&prog, &xq[0]).unwrap()
    );
    let linear = prog
        .steps
        .iter()
        .filter(|s| protocol::layer_shape(s).is_some())
        .count();
    assert_eq!(srv.on_the_fly_layers, linear);
    assert_eq!(srv.encoded_bytes, 0);
    let fly = srv
        .first
        .as_ref()
        .unwrap()
        .steps
        .iter()
        .filter(|s| s.on_the_fly)
        .count();
    assert_eq!(fly, linear);
    assert!(srv.peak_rss_bytes.is_some_and(|b| b > 0));
}

/// ResNet-18 (ImageNet) lowered at s = 8 for `n8192`, and a planner for 2 threads without
/// a time slack.
fn resnet18_imagenet_planner() -> (nn::Program, Params, Planner) {
    let network = nn::import_bytes(&nn::zoo::onnx("resnet18-imagenet", 1).unwrap()).unwrap();
    let params = Params::preset("n8192").unwrap();
    let prog = nn::lower(&network, 8, params.p()).unwrap();
    let mut planner = Planner::new(&params, &Link::NONE);
    planner.threads = 2;
    planner.time_slack = 0.0;
    (prog, params, planner)
}

/// The planner's own pick for every layer of `prog`, with a weight budget of `limit`.
fn auto_plan(
    prog: &nn::Program,
    params: &Params,
    planner: &Planner,
    limit: Option<u64>,
) -> NetworkPlan {
    NetworkPlan::new(
        prog.clone(),
        params,
        planner,
        limit,
        &MethodChoice::Auto,
        None,
    )
    .unwrap()
}

/// The time slack: without it every layer takes its fastest candidate; with it the
/// plan's predicted time stays within the allowance, its bytes per inference fall,
/// every traded layer saves bytes against its fastest candidate, and no further switch
/// would fit the allowance; a method the user fixed is not traded.
#[test]
fn the_time_slack_trades_time_for_bytes_within_the_allowance() {
    let (prog, params, mut planner) = resnet18_imagenet_planner();
    let plan = |planner: &Planner, method: &MethodChoice| {
        NetworkPlan::new(prog.clone(), &params, planner, None, method, None).unwrap()
    };
    let online = |c: &Candidate| {
        let e = c.estimate.as_ref().unwrap();
        e.bytes_up + e.bytes_down
    };
    let bytes = |p: &NetworkPlan| {
        p.layers
            .iter()
            .map(|l| online(l.picked().unwrap()))
            .sum::<u64>()
    };
    let fastest = plan(&planner, &MethodChoice::Auto);
    for l in &fastest.layers {
        let best = l
            .candidates
            .iter()
            .filter(|c| c.estimate.is_ok())
            .map(|c| c.predicted_ms)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(l.picked().unwrap().predicted_ms, best, "{}", l.name);
    }
    let slack = 0.3;
    planner.time_slack = slack;
    let traded = plan(&planner, &MethodChoice::Auto);
    let allowance = fastest.predicted_ms() * (1.0 + slack);
    let total = traded.predicted_ms();
    assert!(total <= allowance * (1.0 + 1e-12), "{total} > {allowance}");
    assert!(bytes(&traded) < bytes(&fastest));
    let mut switched = 0;
    for (t, f) in traded.layers.iter().zip(&fastest.layers) {
        let (tc, fc) = (t.picked().unwrap(), f.picked().unwrap());
        if tc.method != fc.method {
            switched += 1;
            assert!(online(tc) < online(fc), "{}", t.name);
        }
        for c in t.candidates.iter().filter(|c| c.estimate.is_ok()) {
            if online(c) < online(tc) {
                assert!(
                    total - tc.predicted_ms + c.predicted_ms > allowance,
                    "{}: {} would still fit",
                    t.name,
                    c.method.name()
                );
            }
        }
    }
    assert!(switched > 0);
    let fixed = plan(&planner, &MethodChoice::parse("cheetah").unwrap());
    for l in fixed
        .layers
        .iter()
        .filter(|l| matches!(l.shape, LayerShape::Conv(_)))
    {
        assert_eq!(l.pick.method().name(), "cheetah", "{}", l.name);
    }
}

/// A program whose weights exceed its stated public bound is refused: the flooding of
/// coefficient-encoded responses is sized by that bound.
#[test]
fn weights_beyond_the_programs_bound_are_refused() {
    let network = nn::import_bytes(&nn::zoo::onnx("mnist-d", 1).unwrap()).unwrap();
    let params = Params::preset("n8192").unwrap();
    let prog = nn::lower(&network, 6, params.p()).unwrap();
    assert_eq!(prog.weight_bound_bits, Some(6));
    assert!(prog.weights_within(6));
    let planner = Planner::new(&params, &Link::NONE);
    let ok = NetworkPlan::new(
        prog.clone(),
        &params,
        &planner,
        None,
        &MethodChoice::Auto,
        None,
    )
    .unwrap();
    assert_eq!(ok.params.weight_bound_bits(), Some(6));
    let mut bad = prog.clone();
    bad.weight_bound_bits = Some(2);
    assert!(!bad.weights_within(2));
    assert!(NetworkPlan::new(bad, &params, &planner, None, &MethodChoice::Auto, None).is_err());
    // a program whose weights break a bound does not claim it
    assert_eq!(prog.with_weight_bound(2).weight_bound_bits, None);
}

/// A memory budget holds the layers whose encoding per query would cost the most time
/// per byte held (of those for which it would cost any), greedily while they fit; then a layer left out holds, if one fits and
/// beats its encoding per query, the held candidate of another method that saves the most
/// time per byte (Cheetah's padded tiles hold 1x1 filters 2^a times smaller), greedily in
/// that order. The held set and methods equal those two greedy passes made here from the
/// plans with every layer held and with none, every layer left out has no held candidate
/// that would fit what the budget has left and beat its encoding per query, and each
/// layer is planned as it runs.
#[test]
fn a_memory_budget_holds_the_layers_that_save_the_most_time_per_byte() {
    let (prog, params, mut planner) = resnet18_imagenet_planner();
    // held plaintexts read for free: then some layers beat their encoding per query held
    // with another method's smaller encoding, and the second pass has work to do (the
    // passes are under test here, not the prices)
    planner.model.held_read_us_per_mb = Some(0.0);
    let plan = |limit: Option<u64>| auto_plan(&prog, &params, &planner, limit);
    let (all, none) = (plan(None), plan(Some(0)));
    let bytes_of = |c: &Candidate| c.estimate.as_ref().map_or(u64::MAX, |e| e.encoded_bytes);
    let size = |l: &protocol::LayerPick| bytes_of(l.picked().unwrap());
    let fly_ms = |k: usize| none.layers[k].picked().unwrap().predicted_ms;
    let total: u64 = all.layers.iter().map(size).sum();
    assert!(none.layers.iter().all(|l| l.on_the_fly));
    // layers held with another method than their pick with every layer held
    let mut other_method = 0;
    for budget in [total / 3, total / 10] {
        let mut order: Vec<(f64, usize, u64)> = all
            .layers
            .iter()
            .enumerate()
            .map(|(k, h)| {
                let saved = fly_ms(k) - h.picked().unwrap().predicted_ms;
                (saved / size(h) as f64, k, size(h))
            })
            .filter(|(rate, _, _)| *rate > 0.0)
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0));
        let (mut held, mut want) = (0u64, vec![None; all.layers.len()]);
        for &(_, k, bytes) in &order {
            if held + bytes <= budget {
                held += bytes;
                want[k] = Some(all.layers[k].pick.method());
            }
        }
        // the held candidate of a left-out layer that saves the most time per byte and
        // fits what is left
        let best = |k: usize, held: u64| {
            all.layers[k]
                .candidates
                .iter()
                .filter(|c| c.estimate.is_ok() && held + bytes_of(c) <= budget)
                .map(|c| ((fly_ms(k) - c.predicted_ms) / bytes_of(c).max(1) as f64, c))
                .filter(|(rate, _)| *rate > 0.0)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(rate, c)| (rate, k, bytes_of(c), c.method))
        };
        let mut second: Vec<_> = (0..want.len())
            .filter(|&k| want[k].is_none())
            .filter_map(|k| best(k, held))
            .collect();
        second.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, k, bytes, method) in second {
            if held + bytes <= budget {
                held += bytes;
                want[k] = Some(method);
                other_method += 1;
            }
        }
        let got = plan(Some(budget));
        let got_held: Vec<Option<protocol::LayerMethod>> = got
            .layers
            .iter()
            .map(|l| (!l.on_the_fly).then(|| l.pick.method()))
            .collect();
        assert_eq!(got_held, want, "budget {budget}");
        assert!(want.iter().any(|h| h.is_some()) && want.iter().any(|h| h.is_none()));
        assert_eq!(got.held_bytes(), held);
        for (k, l) in got.layers.iter().enumerate() {
            if l.on_the_fly {
                assert_eq!(l.pick.method(), none.layers[k].pick.method(), "{}", l.name);
                assert!(best(k, held).is_none(), "{} would fit", l.name);
            } else {
                let c = l.picked().unwrap();
                assert_eq!(size(l), bytes_of(c), "{}", l.name);
            }
        }
    }
    assert!(
        other_method > 0,
        "no budget held a layer's smaller encoding"
    );
}

/// A layer is held only where holding its weights is predicted faster than encoding
/// them per query, whatever the budget: with held strided transforms priced far above
/// NTT-form products (as on a CPU whose NTT-form products run on IFMA lanes), the 1x1
/// layers Cheetah would hold as strided transforms are encoded per query even with no
/// budget, each with the pick and prediction of the plan that holds nothing; every
/// layer still held is predicted faster held than per query; with the reference costs
/// (strided products priced as NTT-form ones) the same network holds every layer.
#[test]
fn a_layer_is_held_only_where_holding_is_faster() {
    let (prog, params, mut planner) = resnet18_imagenet_planner();
    let all = auto_plan(&prog, &params, &planner, None);
    assert!(all.layers.iter().all(|l| !l.on_the_fly));
    planner.model.sc_mult_strided_us = Some(planner.model.sc_mult_us * 20.0);
    let (got, none) = (
        auto_plan(&prog, &params, &planner, None),
        auto_plan(&prog, &params, &planner, Some(0)),
    );
    // beyond reading its plaintexts, a held layer pays only for strided products
    let read_us_per_mb = planner.model.held_read_us_per_mb();
    let pays_for_strides = |c: &Candidate| {
        c.estimate.as_ref().is_ok_and(|e| {
            e.held_products_ms > e.encoded_bytes as f64 / 1e6 * read_us_per_mb / 1e3 + 1e-9
        })
    };
    let strided_held = |l: &protocol::LayerPick| l.picked().is_some_and(pays_for_strides);
    let mut per_query = 0;
    for (k, l) in got.layers.iter().enumerate() {
        let fly = none.layers[k].picked().unwrap().predicted_ms;
        if l.on_the_fly {
            per_query += 1;
            assert_eq!(l.pick, none.layers[k].pick, "{}", l.name);
            assert_eq!(l.picked().unwrap().predicted_ms, fly, "{}", l.name);
        } else {
            assert!(
                l.picked().unwrap().predicted_ms < fly,
                "{} held, slower",
                l.name
            );
            assert!(
                !strided_held(l),
                "{} held as slow strided transforms",
                l.name
            );
        }
    }
    assert!(per_query > 0, "no layer went per query");
    // a layer the reference costs held as a strided transform goes per query (another
    // may hold another method's larger, faster encoding instead: held bytes can grow)
    // (priced as `got` prices it: the reference costs add nothing for strides)
    let strided = |k: usize, method: protocol::LayerMethod| {
        got.layers[k]
            .candidates
            .iter()
            .find(|c| c.method == method)
            .is_some_and(pays_for_strides)
    };
    assert!(
        (0..all.layers.len())
            .any(|k| strided(k, all.layers[k].pick.method()) && got.layers[k].on_the_fly),
        "no strided layer went per query"
    );
}

/// A network plan estimates each distinct layer shape once and prices it held or
/// encoded per query from the same estimates: its picks and every candidate's
/// prediction equal what `Planner::choose` gives layer by layer on the plan's
/// parameters, for a network whose shapes repeat (ResNet-18's blocks).
#[test]
fn a_network_plan_prices_each_layer_as_its_own_choice_would() {
    let (prog, params, planner) = resnet18_imagenet_planner();
    for (limit, on_the_fly) in [(None, false), (Some(0), true)] {
        let plan = auto_plan(&prog, &params, &planner, limit);
        let mut shapes = Vec::new();
        for l in &plan.layers {
            if !shapes.contains(&l.shape) {
                shapes.push(l.shape);
            }
            let (pick, cands) = planner.choose(&l.shape, &plan.params, on_the_fly).unwrap();
            assert_eq!(l.on_the_fly, on_the_fly, "{}", l.name);
            assert_eq!(l.pick, pick, "{}", l.name);
            let priced = |c: &[Candidate]| {
                c.iter()
                    .map(|c| (c.method, c.predicted_ms, c.estimate.is_ok()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(priced(&l.candidates), priced(&cands), "{}", l.name);
        }
        assert!(shapes.len() < plan.layers.len(), "no shape repeats");
    }
}
