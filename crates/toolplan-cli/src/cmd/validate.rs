//! `toolplan validate`: every check a run makes before it starts, and nothing else.

use serde_json::json;

use crate::Outcome;
use crate::args::ValidateArgs;
use crate::cmd::{print_problems, read_plan};
use crate::output::outln;
use crate::settings::Settings;
use crate::toolset;

/// Runs the subcommand.
pub async fn execute(args: ValidateArgs, settings: Settings) -> anyhow::Result<Outcome> {
    let text = read_plan(&args.input.plan, settings.limits.max_plan_bytes)?;
    let engine = toolset::engine(&settings).await?;
    match engine.compile(&text) {
        Ok(plan) => {
            let waves: Vec<Vec<&str>> = plan
                .waves()
                .iter()
                .map(|w| w.iter().map(|&i| plan.steps()[i].id.as_str()).collect())
                .collect();
            if args.json {
                outln!(
                    "{}",
                    json!({"valid": true, "steps": plan.len(), "waves": waves})
                )?;
            } else {
                outln!(
                    "valid: {} step{} in {} wave{}",
                    plan.len(),
                    if plan.len() == 1 { "" } else { "s" },
                    waves.len(),
                    if waves.len() == 1 { "" } else { "s" }
                )?;
                for (i, w) in waves.iter().enumerate() {
                    outln!("  wave {i}: {}", w.join(", "))?;
                }
            }
            Ok(Outcome::Ok)
        }
        Err(invalid) => {
            if args.json {
                let problems: Vec<String> =
                    invalid.problems.iter().map(ToString::to_string).collect();
                outln!("{}", json!({"valid": false, "problems": problems}))?;
            }
            print_problems(&args.input.plan, &invalid);
            Ok(Outcome::InvalidPlan)
        }
    }
}
