//! Golden (snapshot) tests of what a user sees from the `topocomm` CLI where it does not
//! depend on time or the machine: the help of every command, `list`, `topology` as text,
//! JSON and SVG, `explain` as text and JSON, and the error (and exit status) of each bad
//! input the README promises a clear refusal for. Beside them, `list`'s step counts held
//! against the schedules `explain` runs. The expected outputs live in
//! `tests/snapshots/golden__*.snap`; after a deliberate change, review the new output
//! (`INSTA_UPDATE=always cargo test -p topocomm-coordinator --test golden`, then read
//! the diff of the `.snap` files) before committing it.
//!
//! Nothing here starts a cluster or opens a connection: every command either only
//! prints or is refused before it would start a process (checked: the `--logs` folder a
//! refused run or sweep names is never created). Each command runs in a scratch folder
//! of its own, so a file it writes has a short relative name. Filters mask what differs
//! between machines and builds: the package version (`topocomm --version`), and in the
//! refusals of a run too large for this machine, the memory, descriptor and process
//! limits it reads from the machine.

mod common;

use std::process::ExitStatus;
use std::time::Duration;

use common::{Finished, Scratch, command, read_text, run_bounded, topocomm_bin};

/// Longest any of these commands may take: none of them runs a collective.
const PATIENCE: Duration = Duration::from_secs(60);

/// The folder a refused `run` or `sweep` is pointed at for its node logs: it must never
/// be created.
const LOGS: &str = "logs";

/// Runs `topocomm <words>` (split at whitespace) in the scratch folder, the steering
/// environment cleared, within [`PATIENCE`].
fn topocomm_in(scratch: &Scratch, words: &str) -> Finished {
    let mut cli = command(&topocomm_bin());
    cli.args(words.split_whitespace()).current_dir(&scratch.path);
    run_bounded(cli, scratch, "topocomm", PATIENCE)
}

/// The exit status as a user's shell reports it.
fn exit_code(status: ExitStatus) -> String {
    status.code().map_or_else(|| format!("killed ({status})"), |code| code.to_string())
}

/// Everything a user sees of a finished command: exit status, stdout and stderr.
fn seen(finished: &Finished) -> String {
    format!(
        "exit status: {}\n----- stdout -----\n{}----- stderr -----\n{}",
        exit_code(finished.status),
        finished.stdout,
        finished.stderr
    )
}

/// Holds `text` against the snapshot `name`, the command line as its description.
fn assert_golden(name: &str, words: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_description(format!("topocomm {words}"));
    settings.set_omit_expression(true);
    settings.set_prepend_module_to_snapshot(true);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// Runs `topocomm <words>`, which must succeed, and holds what it shows against the
/// snapshot `name`.
fn assert_shows(name: &str, words: &str) {
    let scratch = Scratch::new(name);
    let finished = topocomm_in(&scratch, words);
    assert!(finished.status.success(), "topocomm {words} failed:\n{}", seen(&finished));
    assert_golden(name, words, &seen(&finished));
}

#[test]
fn help_of_every_command() {
    let cases = [
        ("help", "--help"),
        ("help_run", "run --help"),
        ("help_sweep", "sweep --help"),
        ("help_explain", "explain --help"),
        ("help_list", "list --help"),
        ("help_topology", "topology --help"),
        ("help_calibrate", "calibrate --help"),
        ("help_bench_model", "bench-model --help"),
        ("help_simulate", "simulate --help"),
        ("help_serve", "serve --help"),
        ("help_status", "status --help"),
        ("help_tune", "tune --help"),
        ("help_subcommand", "help run"),
    ];
    for (name, words) in cases {
        assert_shows(name, words);
    }
}

#[test]
fn no_subcommand_prints_the_usage_and_fails() {
    let scratch = Scratch::new("no-subcommand");
    let finished = topocomm_in(&scratch, "");
    assert_eq!(finished.status.code(), Some(2), "{}", seen(&finished));
    assert_golden("no_subcommand", "", &seen(&finished));
}

#[test]
fn version_names_the_program() {
    let scratch = Scratch::new("version");
    let finished = topocomm_in(&scratch, "--version");
    assert!(finished.status.success(), "{}", seen(&finished));
    assert_eq!(finished.stdout.trim(), format!("topocomm {}", env!("CARGO_PKG_VERSION")));
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"topocomm \d+\.\d+\.\d+\S*", "topocomm [VERSION]");
    settings.bind(|| assert_golden("version", "--version", &seen(&finished)));
}

#[test]
fn the_algorithm_catalogue() {
    assert_shows("list", "list");
    assert_shows("list_markdown", "list --markdown");
    assert_shows("list_allreduce", "list allreduce");
}

/// The shift every step count below is taken with (`--shift`).
const SHIFT: u64 = 3;

/// The step count `topocomm list` gives every algorithm is the longest chain of
/// messages that `explain` (and `run`) count in its schedule, on the topology it is made
/// for (a torus for the grid algorithms) at p = 16 and 64, under the port model `list`
/// names beside it (`--ports`), or under both where it names none.
#[test]
fn listed_step_counts_are_the_chains_explain_counts() {
    use topocomm_proto::catalogue::ENTRIES;
    use topocomm_proto::spec::Ports;
    use topocomm_proto::topology::TopologyKind;

    let scratch = Scratch::new("step-counts");
    let mut checked = 0;
    for entry in ENTRIES {
        let topology =
            if entry.made_for.includes(TopologyKind::Torus) { TopologyKind::Torus } else { entry.made_for.first() };
        let models = match entry.steps_hold_under() {
            Some(ports) => vec![ports],
            None => vec![Ports::One, Ports::All],
        };
        for (p, ports) in [16, 64].into_iter().flat_map(|p| models.iter().map(move |&ports| (p, ports))) {
            let Some(listed) = entry.steps.chain(p, SHIFT) else { continue };
            let words = format!(
                "explain {} -a {} -t {topology} -n {p} -s 1KiB --shift {SHIFT} --ports {ports} --json",
                entry.collective, entry.algorithm
            );
            let finished = topocomm_in(&scratch, &words);
            assert!(finished.status.success(), "topocomm {words} failed:\n{}", seen(&finished));
            let explained: serde_json::Value = serde_json::from_str(&finished.stdout).expect("explain prints JSON");
            assert_eq!(explained["ports"], ports.to_string(), "explain says its port model");
            let steps = explained["steps"].as_u64().expect("explain says its steps");
            assert!(
                listed.contains(&steps),
                "{} by {} on a {topology} of {p}, {ports}-port: `list` says {}, {listed:?} steps, but its schedule \
                 is {steps} deep",
                entry.collective,
                entry.algorithm,
                entry.steps_text()
            );
            checked += 1;
        }
    }
    assert!(checked >= 3 * 40, "only {checked} step counts were checked");
}

#[test]
fn topologies_as_text_and_json() {
    let cases = [
        ("topology_ring_8", "topology --topology ring --nodes 8"),
        ("topology_torus_16", "topology --topology torus --nodes 16"),
        ("topology_hypercube_8", "topology --topology hypercube --nodes 8"),
        ("topology_mesh_3x4", "topology --topology mesh --dims 3x4 --nodes 12"),
        ("topology_torus3d_2x2x3", "topology --topology torus3d --dims 2x2x3 --nodes 12"),
        ("topology_full_5", "topology --topology full --nodes 5"),
        ("topology_torus_2x3_json", "topology --topology torus --dims 2x3 --nodes 6 --json"),
        // A policy that routes flows apart: its name, each pair's tag-0 route and every
        // route its flows may take (issue 46, item 2).
        (
            "topology_dragonfly_2x1x1_valiant_json",
            "topology --topology dragonfly --dims 2x1x1 --nodes 6 --routes valiant:3 --json",
        ),
    ];
    for (name, words) in cases {
        assert_shows(name, words);
    }
}

/// The SVG pictures `topology --svg` draws (the text it prints as well is the same as
/// without `--svg`, held by [`topologies_as_text_and_json`]).
#[test]
fn topology_pictures() {
    let cases = [
        ("svg_ring_8", "--topology ring --nodes 8"),
        ("svg_torus_16", "--topology torus --nodes 16"),
        ("svg_hypercube_8", "--topology hypercube --nodes 8"),
        ("svg_mesh_3x4", "--topology mesh --dims 3x4 --nodes 12"),
    ];
    for (name, shape) in cases {
        let scratch = Scratch::new(name);
        let words = format!("topology {shape} --svg wiring.svg");
        let finished = topocomm_in(&scratch, &words);
        assert!(finished.status.success(), "topocomm {words} failed:\n{}", seen(&finished));
        let text = topocomm_in(&scratch, &format!("topology {shape}"));
        assert_eq!(finished.stdout, text.stdout, "--svg changed what topology {shape} prints");
        let title = text.stdout.split(':').next().unwrap_or_default();
        assert_eq!(finished.stderr, format!("wrote the picture of the {title} to wiring.svg\n"));
        let svg = read_text(&scratch.path.join("wiring.svg"));
        roxmltree::Document::parse(&svg).unwrap_or_else(|error| panic!("{name} is not XML ({error}):\n{svg}"));
        assert_golden(name, &words, &svg);
    }
}

#[test]
fn schedules_explained_as_text_and_json() {
    let cases = [
        // The README's example.
        (
            "explain_alltoall_hypercube_8",
            "explain alltoall --topology hypercube --nodes 8 --size 4KiB --ts 200us --th 20us --tw 10ns",
        ),
        // No physics given: the defaults are said.
        ("explain_broadcast_ring_8_defaults", "explain broadcast -t ring -n 8 -s 1KiB"),
        // A hypercube schedule on a ring: routes of several hops that share links.
        (
            "explain_allgather_hypercube_on_ring_8",
            "explain allgather -a hypercube -t ring -n 8 -s 1KiB --ts 1us --tw 1ns",
        ),
        // `auto` is resolved and named.
        ("explain_allreduce_auto_hypercube_8", "explain allreduce -a auto -t hypercube -n 8 -s 1MiB"),
        // Cut-through in packets, a mesh's rows then columns.
        (
            "explain_scatter_mesh_ct_packets",
            "explain scatter -t mesh --dims 2x3 -n 6 --root 4 -s 16B --routing ct --packet 8B --ts 10us --th 1us --tw 1ns",
        ),
        // Long steps are cut short.
        ("explain_allgather_ring_16_cut_short", "explain allgather -t ring -n 16 -s 1KiB"),
        ("explain_scatter_hypercube_json", "explain scatter -t hypercube -n 8 -s 8B --routing ct --packet 4B --json"),
    ];
    for (name, words) in cases {
        assert_shows(name, words);
    }
}

/// `simulate`'s scaling tables: standard output is the same for the same command, byte
/// for byte; standard error's wall times, rates and memory are the machine's (masked).
#[test]
fn simulated_scaling_tables() {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"in \d+\.\d+ s of wall time \(\d+ messages/s\), peak memory so far \S+ \S+", "in [WALL TIME]");
    settings.bind(|| {
        let cases = [
            // The textbook's asymptotics: three topologies, p doubling, closed forms beside.
            (
                "simulate_allreduce_scaling",
                "simulate allreduce -t hypercube,torus,ring -n 4..64 --ts 10us --th 1us --tw 1ns",
            ),
            // Every broadcast algorithm on a ring, cut-through.
            ("simulate_broadcast_algorithms_ct", "simulate broadcast -t ring -n 16 -a all --routing ct -s 1KiB"),
            // Lengths only, said plainly.
            (
                "simulate_allgather_lengths_only",
                "simulate allgather -t torus --dims 8x8 -n 64 -s 64KiB --payload lengths",
            ),
            ("simulate_scatter_json", "simulate scatter -t hypercube -n 8 -s 1KiB --json"),
        ];
        for (name, words) in cases {
            let scratch = Scratch::new(name);
            let first = topocomm_in(&scratch, words);
            assert!(first.status.success(), "topocomm {words} failed:\n{}", seen(&first));
            let again = topocomm_in(&scratch, words);
            assert_eq!(first.stdout, again.stdout, "topocomm {words}: the same command prints the same numbers");
            assert_golden(name, words, &seen(&first));
        }
    });
}

/// Bad input the README promises a clear refusal for: each command must fail without a
/// panic, print nothing on stdout, start nothing (its `--logs` folder is never made),
/// and say why on stderr as the snapshot has it. Clap's own parse errors exit with 2,
/// the refusals of topocomm with 1.
#[test]
fn bad_input_is_refused_with_a_clear_error() {
    let cases = [
        // Names that are not ours.
        ("refused_unknown_topology", "run broadcast --topology donut"),
        ("refused_unknown_collective", "run broadcastt"),
        ("refused_unknown_algorithm", "run broadcast --algorithm fastest"),
        ("refused_unknown_dtype", "run allreduce --dtype f16"),
        ("refused_unknown_op", "run allreduce --op avg"),
        ("refused_unknown_routing", "run broadcast --routing wormhole"),
        // An algorithm of another collective.
        ("refused_algorithm_of_another_collective", "run broadcast --algorithm bruck --logs logs"),
        ("refused_sweep_algorithm_of_another_collective", "sweep scan --algorithm ring,bruck --logs logs"),
        ("explain_refused_algorithm_of_another_collective", "explain barrier --algorithm ring"),
        // Shapes and node counts that do not fit.
        ("refused_hypercube_of_6", "run broadcast --topology hypercube --nodes 6 --logs logs"),
        ("refused_dims_not_matching_nodes", "run broadcast --topology mesh --dims 3x3 --nodes 8 --logs logs"),
        ("refused_dims_of_the_wrong_rank", "run broadcast --topology torus3d --dims 2x4 --nodes 8 --logs logs"),
        ("refused_dims_not_a_shape", "run broadcast --topology mesh --dims 4x"),
        ("refused_zero_nodes", "run broadcast --topology ring --nodes 0 --logs logs"),
        ("topology_refused_hypercube_of_6", "topology --topology hypercube --nodes 6"),
        ("explain_refused_hypercube_of_12", "explain broadcast --topology hypercube --nodes 12"),
        ("serve_refused_zero_nodes", "serve --nodes 0 --listen 127.0.0.1:0"),
        // Sizes.
        ("refused_size_not_whole_elements", "run allreduce --size 10B --logs logs"),
        ("refused_size_not_a_size", "run allreduce --size lots"),
        ("sweep_refused_no_size_can_run", "sweep allreduce --sizes 10B,12B --logs logs"),
        ("sweep_refused_sizes_not_a_range", "sweep allreduce --sizes 1MiB..8B"),
        // Roots.
        ("refused_root_outside_the_cluster", "run broadcast --nodes 8 --root 9 --logs logs"),
        // Iterations and timeouts.
        ("refused_iterations_past_u32", "run allreduce --iterations 4294967295 --logs logs"),
        ("refused_warmup_past_u32", "run allreduce --warmup 4294967295 --logs logs"),
        ("refused_zero_timeout", "run allreduce --timeout 0"),
        ("refused_timeout_of_centuries", "run allreduce --timeout 200years"),
        ("refused_timeout_not_a_duration", "run allreduce --timeout soon"),
        // Link physics.
        ("refused_time_without_unit", "run broadcast --ts 10"),
        ("refused_zero_packet", "run broadcast --ts 1us --routing ct --packet 0B --logs logs"),
        ("refused_auto_with_given_times", "run broadcast --ts auto --th 1us --logs logs"),
        // Dilation: only of emulated links, by 1 to 1000.
        ("refused_dilation_of_raw_links", "run broadcast --dilation 4 --logs logs"),
        ("sweep_refused_dilation_of_raw_links", "sweep allreduce --dilation auto --logs logs"),
        ("calibrate_refused_dilation", "calibrate --dilation 2 --logs logs"),
        ("refused_dilation_out_of_range", "run broadcast --ts 1us --dilation 0.5"),
        ("refused_dilation_not_a_number", "bench-model --dilation fast"),
        // Options that need another.
        ("refused_steps_without_diagram", "run broadcast --steps"),
        // Simulations.
        ("simulate_refused_node_counts", "simulate broadcast -n 64..8"),
        ("simulate_refused_dims_with_two_topologies", "simulate broadcast -t torus,mesh --dims 2x2 -n 4"),
        ("simulate_refused_drawing_many_points", "simulate broadcast -n 8,16 --trace t.json"),
        ("simulate_refused_dilation", "simulate broadcast -n 8 --dilation 4"),
        ("refused_unknown_picture_format", "sweep allreduce --plot plot.gif --logs logs"),
        // A serving coordinator needs its address and the token (nothing is dialled).
        ("status_refused_without_coordinator", "status"),
        ("status_refused_without_token", "status --coordinator 127.0.0.1:9"),
        ("run_refused_without_token", "run broadcast --coordinator 127.0.0.1:9"),
    ];
    for (name, words) in cases {
        assert_refused(name, words);
    }
}

/// A local run too large for this machine is refused before anything starts, naming the
/// limit. The figures are this machine's (the memory available now, and which of the
/// open-file, task and memory limits is the tightest), so they are masked.
#[test]
fn runs_too_large_for_this_machine_are_refused() {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"\d+(?:\.\d+)? [KMGT]?i?B (on this machine|available)", "[MEMORY] $1");
    settings.add_filter(r"at most \d+ local nodes by .*", "at most [N] local nodes by [THE TIGHTEST LIMIT]");
    settings.bind(|| {
        assert_refused("refused_size_no_node_can_hold", "run allreduce --size 100GiB --logs logs");
        assert_refused("refused_more_nodes_than_the_machine", "run allreduce -t ring --nodes 100000 -s 8B --logs logs");
        assert_refused(
            "simulate_refused_data_beyond_memory",
            "simulate allgather -t torus -n 65536 -s 1MiB --payload data",
        );
    });
}

/// Runs `topocomm <words>`, which must be refused (see
/// [`bad_input_is_refused_with_a_clear_error`]), and holds what it shows against the
/// snapshot `name`.
fn assert_refused(name: &str, words: &str) {
    let scratch = Scratch::new(name);
    let finished = topocomm_in(&scratch, words);
    let shown = seen(&finished);
    assert!(matches!(finished.status.code(), Some(1 | 2)), "topocomm {words}:\n{shown}");
    assert!(finished.stdout.is_empty(), "topocomm {words} printed on stdout:\n{shown}");
    assert!(!finished.stderr.contains("panicked"), "topocomm {words} panicked:\n{shown}");
    assert!(finished.stderr.contains("error"), "topocomm {words} did not say what is wrong:\n{shown}");
    assert!(!scratch.path.join(LOGS).exists(), "topocomm {words} got as far as making its log folder");
    assert_golden(name, words, &shown);
}
