//! `toolplan tools`: what a plan can call.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_core::{Engine, Tool};
use toolplan_planner::ExecuteToolPlan;

use crate::Outcome;
use crate::args::ToolsArgs;
use crate::output::outln;
use crate::settings::Settings;
use crate::toolset;

/// Runs the subcommand.
pub async fn execute(args: ToolsArgs, settings: Settings) -> anyhow::Result<Outcome> {
    let registry = Arc::new(toolset::registry(&settings).await?);
    // Each tool's schema as the registry reads it, with what reading it changed.
    let mut listed: Vec<(String, String, Value, Vec<String>)> = registry
        .iter()
        .map(|t| {
            let tool = t.tool();
            (
                tool.name().to_owned(),
                tool.description().to_owned(),
                t.schema().clone(),
                t.warnings().to_vec(),
            )
        })
        .collect();
    if args.with_planner {
        let planner = ExecuteToolPlan::new(Arc::new(Engine::new(registry)));
        listed.push((
            planner.name().to_owned(),
            planner.description().to_owned(),
            planner.parameters(),
            Vec::new(),
        ));
    }
    if args.json {
        let all: Vec<Value> = listed
            .into_iter()
            .map(|(name, description, parameters, warnings)| {
                let mut tool =
                    json!({"name": name, "description": description, "parameters": parameters});
                if !warnings.is_empty() {
                    tool["warnings"] = json!(warnings);
                }
                tool
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&all)?)?;
    } else {
        for (i, (name, description, parameters, warnings)) in listed.iter().enumerate() {
            if i > 0 {
                outln!()?;
            }
            outln!("{name}")?;
            for line in description.lines() {
                outln!("  {line}")?;
            }
            outln!("  parameters: {parameters}")?;
            for warning in warnings {
                outln!("  warning: {warning}")?;
            }
        }
    }
    Ok(Outcome::Ok)
}
