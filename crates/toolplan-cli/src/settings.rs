//! One resolution of the settings of every command that validates or runs plans (run, validate,
//! query-plan, ask, mcp): a flag given on the command line wins, then `[limits]` of
//! `toolplan.toml`, then the command's built-in default.

use std::time::Duration;

use toolplan_core::{Limits, RunConfig};

use crate::config::Config;

/// The longest one tool call of `toolplan run` may take unless a flag or the config says otherwise.
pub const RUN_STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// The limit flags a command was given explicitly; `None` when the flag was not given (its default
/// then comes from the config, else the command's built-in default).
#[derive(Debug, Default, Clone, Copy)]
pub struct LimitFlags {
    /// `--max-steps`.
    pub max_steps: Option<usize>,
    /// `--concurrency`.
    pub concurrency: Option<usize>,
    /// `--step-timeout` (`Some(None)` for `none`).
    pub step_timeout: Option<Option<Duration>>,
    /// `--deadline` (`Some(None)` for `none`).
    pub deadline: Option<Option<Duration>>,
}

/// The limits on a plan's size: the flags, then `[limits]`, then [`Limits::default`].
pub fn limits(config: &Config, flags: &LimitFlags) -> Limits {
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

/// The run configuration `toolplan.toml` sets over [`RunConfig::default`] (for commands without
/// limit flags of their own, or to apply their explicit flags on top).
pub fn run_config(config: &Config) -> anyhow::Result<RunConfig> {
    resolve_run(config, &LimitFlags::default(), RunConfig::default())
}

/// The run configuration: the flags, then `[limits]`, then `base` (the command's built-in
/// defaults).
pub fn resolve_run(
    config: &Config,
    flags: &LimitFlags,
    base: RunConfig,
) -> anyhow::Result<RunConfig> {
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
    if let Some(n) = l.max_value_depth {
        run.max_value_depth = n;
    }
    if let Some(n) = l.max_error_bytes {
        run.max_error_bytes = n;
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
             max_resolved_argument_bytes = 11\nmax_kept_output_bytes = 12\nmax_value_depth = 13\nmax_error_bytes = 14\n",
        );
        let base = RunConfig {
            step_timeout: Some(RUN_STEP_TIMEOUT),
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
        assert_eq!(run.max_value_depth, 13);
        assert_eq!(run.max_error_bytes, 14);
        assert_eq!(limits(&c, &LimitFlags::default()).max_steps, 3);

        let flags = LimitFlags {
            max_steps: Some(7),
            concurrency: Some(5),
            step_timeout: Some(None),
            deadline: Some(Some(Duration::from_secs(4))),
        };
        let run = resolve_run(&c, &flags, base.clone()).expect("resolves");
        assert_eq!(run.step_timeout, None);
        assert_eq!(run.deadline, Some(Duration::from_secs(4)));
        assert_eq!(run.concurrency, 5);
        assert_eq!(limits(&c, &flags).max_steps, 7);

        let empty = Config::default();
        let run = resolve_run(&empty, &LimitFlags::default(), base).expect("resolves");
        assert_eq!(run.step_timeout, Some(RUN_STEP_TIMEOUT));
        assert_eq!(limits(&empty, &LimitFlags::default()), Limits::default());
    }

    #[test]
    fn bad_durations_are_refused_when_the_file_is_read() {
        let err = Config::parse("[limits]\nstep_timeout = \"soon\"\n").unwrap_err();
        assert!(err.to_string().contains("limits.step_timeout"), "{err}");
        assert!(Config::parse("[limits]\ndeadline = \"0s\"\n").is_err());
    }
}
