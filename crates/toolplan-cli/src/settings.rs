//! The settings of a command, resolved once in `main` into one [`Settings`] that the command takes:
//! a flag given on the command line wins, then the environment (`TOOLPLAN_TRUST_CONFIG`), then
//! `toolplan.toml` (its `tools` key and `[limits]`), then the built-in default.
//!
//! The defaults are the same for every command: a step may take 5 minutes
//! ([`RunConfig::default`]), a plan has no deadline except under `toolplan mcp` (5 minutes, as a
//! server's requests must end), and the built-in tool set is `demo` only when the configuration
//! names no MCP servers (so that the demo tools never shadow a server's tool of the same name);
//! `--tools demo` or `tools = "demo"` brings them back beside the servers.
//!
//! The embedded search backend's data directory ([`data_dir`]: `--data-dir`, then
//! `TOOLPLAN_DATA_DIR`, then the per-user data directory) and search limits ([`search_limits`]:
//! `TOOLPLAN_SEARCH_LIMITS` over the defaults) are resolved here too, when a command opens that
//! backend (an unusable value fails only the commands that need it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use anyhow::Context;
use clap::ValueEnum;
use toolplan_core::approval::{ApprovalGate, Confirm};
use toolplan_core::{Limits, RunConfig};
use toolplan_search::SearchLimits;

use crate::approve::TerminalApprover;
use crate::args::{Command, ToolSet, ToolsSelection};
use crate::config::{self, Config};

/// Everything a command runs with besides its own arguments.
#[derive(Debug)]
pub struct Settings {
    /// `toolplan.toml`: the file named with `--config`, else `./toolplan.toml` if it exists, else
    /// empty (and empty for the commands that read no configuration: index, search, template).
    pub config: Config,
    /// The built-in tool set plans run against: `--tools`, else the configuration's `tools`, else
    /// demo when the configuration names no MCP servers, else none. [`ToolSet::None`] for
    /// commands that run no plans over a tool set.
    pub tools: ToolSet,
    /// The limits on a plan's size.
    pub limits: Limits,
    /// How plans run: concurrency, step timeout, deadline, run budgets.
    pub run: RunConfig,
}

impl Settings {
    /// The settings of `command`; `trust_config` is `--trust-config`.
    pub fn resolve(command: &Command, trust_config: bool) -> anyhow::Result<Settings> {
        let given = Given::of(command);
        let trust = trust_config || config::trusted_by_env();
        let config = if given.reads_config {
            Config::load(given.config, trust)?
        } else {
            Config::default()
        };
        let tools = match given.tools {
            Some(flag) => tool_set(flag, &config)?,
            None => ToolSet::None,
        };
        Ok(Settings {
            limits: limits(&config, &given.flags),
            run: resolve_run(&config, &given.flags, given.base)?,
            tools,
            config,
        })
    }
}

/// The variable that names the data directory.
pub const DATA_DIR_ENV: &str = "TOOLPLAN_DATA_DIR";

/// The variable that changes the embedded backend's search limits: `name=value` pairs separated by
/// commas (`timeout=10s,max_result_window=50000`; see `toolplan_search::limits`).
pub const SEARCH_LIMITS_ENV: &str = "TOOLPLAN_SEARCH_LIMITS";

/// The default search limits with `$TOOLPLAN_SEARCH_LIMITS` applied.
pub fn search_limits() -> anyhow::Result<SearchLimits> {
    let mut limits = SearchLimits::default();
    if let Some(spec) = std::env::var_os(SEARCH_LIMITS_ENV) {
        let spec = spec.to_string_lossy();
        limits
            .apply_overrides(&spec)
            .with_context(|| format!("in {SEARCH_LIMITS_ENV}"))?;
    }
    Ok(limits)
}

/// The embedded backend's data directory: `flag` (`--data-dir`), else `$TOOLPLAN_DATA_DIR`, else
/// the per-user data directory.
pub fn data_dir(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(
            std::env::var_os("HOME")
                .context("no --data-dir, TOOLPLAN_DATA_DIR or HOME to put indices in")?,
        )
        .join(".local/share"),
    };
    Ok(base.join("toolplan/indices"))
}

/// What the command line of a command says about its settings.
struct Given<'a> {
    /// `--config`.
    config: Option<&'a Path>,
    /// Whether the command reads a configuration at all.
    reads_config: bool,
    /// `Some(--tools)` for commands that run plans over a tool set.
    tools: Option<Option<ToolSet>>,
    /// The limit flags given.
    flags: LimitFlags,
    /// The command's built-in run defaults.
    base: RunConfig,
}

impl<'a> Given<'a> {
    fn of(command: &'a Command) -> Given<'a> {
        let plans = |selection: &'a ToolsSelection, flags: LimitFlags| Given {
            config: selection.config.as_deref(),
            reads_config: true,
            tools: Some(selection.tools),
            flags,
            base: RunConfig::default(),
        };
        match command {
            Command::Run(a) => plans(
                &a.tools,
                LimitFlags {
                    max_steps: a.input.max_steps,
                    concurrency: a.concurrency.map(|n| n as usize),
                    step_timeout: a.step_timeout.map(|d| d.0),
                    deadline: a.deadline.map(|d| d.0),
                    confirm: a.confirm.map(Into::into),
                },
            ),
            Command::Validate(a) => plans(
                &a.tools,
                LimitFlags {
                    max_steps: a.input.max_steps,
                    ..LimitFlags::default()
                },
            ),
            Command::Tools(a) => Given {
                // Declared tools are the ones listed: no built-in set unless named.
                tools: Some(
                    a.tools
                        .tools
                        .or(a.tool_defs.is_some().then_some(ToolSet::None)),
                ),
                ..plans(&a.tools, LimitFlags::default())
            },
            Command::Mcp(a) => Given {
                // A server's requests must end: its plans have a deadline unless told `none`.
                base: RunConfig {
                    deadline: Some(crate::cmd::mcp::DEFAULT_DEADLINE),
                    ..RunConfig::default()
                },
                ..plans(
                    &a.tools,
                    LimitFlags {
                        step_timeout: a.step_timeout.map(|d| d.0),
                        deadline: a.deadline.map(|d| d.0),
                        confirm: a.confirm.map(Into::into),
                        ..LimitFlags::default()
                    },
                )
            },
            Command::Ask(a) => Given {
                config: a.config.as_deref(),
                reads_config: true,
                // Declared tools are the ones asked about: no built-in set unless named.
                tools: Some(a.tools.or(a.tool_defs.is_some().then_some(ToolSet::None))),
                flags: LimitFlags {
                    confirm: a.confirm.map(Into::into),
                    ..LimitFlags::default()
                },
                base: RunConfig::default(),
            },
            Command::QueryPlan(a) => Given {
                config: a.config.as_deref(),
                reads_config: true,
                tools: Some(a.tools),
                flags: LimitFlags {
                    max_steps: a.input.max_steps,
                    step_timeout: a.step_timeout.map(|d| d.0),
                    ..LimitFlags::default()
                },
                base: RunConfig::default(),
            },
            Command::Dsl(a) => Given {
                config: a.config.as_deref(),
                reads_config: true,
                tools: None,
                flags: LimitFlags::default(),
                base: RunConfig::default(),
            },
            Command::Index(_) | Command::Search(_) | Command::Template(_) => Given {
                config: None,
                reads_config: false,
                tools: None,
                flags: LimitFlags::default(),
                base: RunConfig::default(),
            },
        }
    }
}

/// The limit flags a command was given explicitly; `None` when the flag was not given (its default
/// then comes from the config, else the built-in default).
#[derive(Debug, Default, Clone, Copy)]
struct LimitFlags {
    /// `--max-steps`.
    max_steps: Option<usize>,
    /// `--concurrency`.
    concurrency: Option<usize>,
    /// `--step-timeout` (`Some(None)` for `none`).
    step_timeout: Option<Option<Duration>>,
    /// `--deadline` (`Some(None)` for `none`).
    deadline: Option<Option<Duration>>,
    /// `--confirm`.
    confirm: Option<Confirm>,
}

/// The built-in tool set: the flag, then the configuration's `tools`, then demo unless the
/// configuration names MCP servers.
fn tool_set(flag: Option<ToolSet>, config: &Config) -> anyhow::Result<ToolSet> {
    Ok(match (flag, config.tools.as_deref()) {
        (Some(t), _) => t,
        // The config names tool sets as the command line does.
        (None, Some(name)) => ToolSet::from_str(name, false).map_err(|_| {
            let known: Vec<String> = ToolSet::value_variants()
                .iter()
                .filter_map(|v| v.to_possible_value())
                .map(|v| v.get_name().to_owned())
                .collect();
            anyhow::anyhow!(
                "unknown tool set '{name}' in the config (known: {})",
                known.join(", ")
            )
        })?,
        (None, None) if config.mcp_servers.is_empty() => ToolSet::Demo,
        (None, None) => ToolSet::None,
    })
}

/// The limits on a plan's size: the flags, then `[limits]`, then [`Limits::default`].
fn limits(config: &Config, flags: &LimitFlags) -> Limits {
    let l = &config.limits;
    let mut limits = Limits::default();
    if let Some(n) = flags.max_steps.or(l.max_steps) {
        limits.max_steps = n;
    }
    if let Some(n) = l.max_plan_bytes {
        limits.max_plan_bytes = n;
    }
    if let Some(n) = l.max_argument_bytes {
        limits.max_argument_bytes = n;
    }
    limits
}

/// The run configuration: the flags, then `[limits]`, then `base` (the command's built-in
/// defaults).
fn resolve_run(config: &Config, flags: &LimitFlags, base: RunConfig) -> anyhow::Result<RunConfig> {
    let l = &config.limits;
    let mut run = base;
    if let Some(n) = flags.concurrency.or(l.concurrency) {
        run.concurrency = n.max(1);
    }
    if let Some(t) = flags.step_timeout.or(l.step_timeout()?) {
        run.step_timeout = t;
    }
    if let Some(t) = flags.deadline.or(l.deadline()?) {
        run.deadline = t;
    }
    if let Some(n) = l.max_output_bytes {
        run.max_output_bytes = n;
    }
    if let Some(n) = l.max_resolved_argument_bytes {
        run.max_resolved_argument_bytes = n;
    }
    if let Some(n) = l.max_kept_output_bytes {
        run.max_kept_output_bytes = n;
    }
    if let Some(n) = l.max_failure_input_bytes {
        run.max_failure_input_bytes = n;
    }
    if let Some(n) = l.max_value_depth {
        run.max_value_depth = n;
    }
    if let Some(n) = l.max_error_bytes {
        run.max_error_bytes = n;
    }
    let confirm = flags.confirm.or(l.confirm()?).unwrap_or_default();
    if confirm != Confirm::Never {
        let mut gate = ApprovalGate::new(confirm, Arc::new(TerminalApprover));
        if let Some(t) = l.approval_timeout()? {
            gate = gate.with_timeout(t);
        }
        run.approval = Some(gate);
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text).expect("a valid config")
    }

    #[test]
    fn flags_win_over_the_config_which_wins_over_defaults() {
        let c = config(
            "[limits]\nmax_steps = 3\nconcurrency = 2\nstep_timeout = \"1s\"\ndeadline = \"none\"\nmax_output_bytes = 10\n\
             max_resolved_argument_bytes = 11\nmax_kept_output_bytes = 12\nmax_value_depth = 13\nmax_error_bytes = 14\n\
             max_failure_input_bytes = 15\n",
        );
        let base = RunConfig {
            step_timeout: Some(Duration::from_secs(60)),
            deadline: Some(Duration::from_secs(9)),
            ..RunConfig::default()
        };
        let run = resolve_run(&c, &LimitFlags::default(), base.clone()).expect("resolves");
        assert_eq!(run.step_timeout, Some(Duration::from_secs(1)));
        assert_eq!(run.deadline, None);
        assert_eq!(run.concurrency, 2);
        assert_eq!(run.max_output_bytes, 10);
        assert_eq!(run.max_resolved_argument_bytes, 11);
        assert_eq!(run.max_kept_output_bytes, 12);
        assert_eq!(run.max_failure_input_bytes, 15);
        assert_eq!(run.max_value_depth, 13);
        assert_eq!(run.max_error_bytes, 14);
        assert_eq!(limits(&c, &LimitFlags::default()).max_steps, 3);

        let flags = LimitFlags {
            max_steps: Some(7),
            concurrency: Some(5),
            step_timeout: Some(None),
            deadline: Some(Some(Duration::from_secs(4))),
            confirm: Some(Confirm::All),
        };
        let run = resolve_run(&c, &flags, base.clone()).expect("resolves");
        assert_eq!(run.approval.as_ref().map(|g| g.confirm), Some(Confirm::All));
        assert_eq!(run.step_timeout, None);
        assert_eq!(run.deadline, Some(Duration::from_secs(4)));
        assert_eq!(run.concurrency, 5);
        assert_eq!(limits(&c, &flags).max_steps, 7);

        let empty = Config::default();
        let run = resolve_run(&empty, &LimitFlags::default(), base).expect("resolves");
        assert_eq!(run.step_timeout, Some(Duration::from_secs(60)));
        assert_eq!(limits(&empty, &LimitFlags::default()), Limits::default());
    }

    #[test]
    fn every_command_has_the_same_step_timeout_default() {
        use clap::Parser;
        let empty = tempfile::NamedTempFile::new().expect("a temporary file");
        let empty = empty.path().to_string_lossy().into_owned();
        for line in [
            &["run", "p.json"][..],
            &["validate", "p.json"],
            &["tools"],
            &["query-plan", "p.json"],
            &["ask", "hi"],
            &["mcp"],
        ] {
            let argv = [&["toolplan"][..], line, &["--config", &empty]].concat();
            let cli = crate::args::Cli::try_parse_from(argv).expect("a valid command line");
            let settings = Settings::resolve(&cli.command, false).expect("resolves");
            assert_eq!(
                settings.run.step_timeout,
                Some(Duration::from_secs(300)),
                "{line:?}"
            );
            let deadline = (line[0] == "mcp").then_some(crate::cmd::mcp::DEFAULT_DEADLINE);
            assert_eq!(settings.run.deadline, deadline, "{line:?}");
        }
    }

    #[test]
    fn demo_tools_only_when_nothing_else_is_configured() {
        let servers = config("[[mcp_servers]]\nname = \"s\"\ncommand = \"x\"\n");
        assert_eq!(tool_set(None, &Config::default()).ok(), Some(ToolSet::Demo));
        assert_eq!(tool_set(None, &servers).ok(), Some(ToolSet::None));
        assert_eq!(
            tool_set(Some(ToolSet::Demo), &servers).ok(),
            Some(ToolSet::Demo)
        );
        let asked = config("tools = \"demo\"\n[[mcp_servers]]\nname = \"s\"\ncommand = \"x\"\n");
        assert_eq!(tool_set(None, &asked).ok(), Some(ToolSet::Demo));
        let err = tool_set(None, &config("tools = \"all\"\n")).unwrap_err();
        assert!(
            err.to_string()
                .contains("unknown tool set 'all' in the config (known: demo, none, search)"),
            "{err}"
        );
    }

    #[test]
    fn bad_durations_are_refused_when_the_file_is_read() {
        let err = Config::parse("[limits]\nstep_timeout = \"soon\"\n").unwrap_err();
        assert!(err.to_string().contains("limits.step_timeout"), "{err}");
        assert!(Config::parse("[limits]\ndeadline = \"0s\"\n").is_err());
    }
}
