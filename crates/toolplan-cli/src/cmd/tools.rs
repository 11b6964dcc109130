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

/// A tool as the listing shows it.
struct Listed {
    name: String,
    description: String,
    /// The parameter schema as the registry reads it.
    parameters: Value,
    /// The output schema as the registry reads it, when the tool declares one.
    output: Option<Value>,
    /// What reading the schemas changed.
    warnings: Vec<String>,
}

/// Runs the subcommand.
pub async fn execute(args: ToolsArgs, settings: Settings) -> anyhow::Result<Outcome> {
    let mut registry = toolset::registry(&settings).await?;
    if let Some(file) = &args.tool_defs {
        let declared = toolset::declared(file)?;
        toolset::warn_schemas(&declared);
        registry.register_all(declared)?;
    }
    let registry = Arc::new(registry);
    // Each tool's schemas as the registry reads them, with what reading them changed.
    let mut listed: Vec<Listed> = registry
        .iter()
        .map(|t| {
            let tool = t.tool();
            Listed {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                parameters: t.schema().clone(),
                output: t.output_schema().cloned(),
                warnings: t.warnings().to_vec(),
            }
        })
        .collect();
    if args.with_planner {
        let mut planner = ExecuteToolPlan::new(Arc::new(Engine::new(registry)));
        if let Some(listing) = args.plan_listing {
            planner = planner.listing(listing.into());
        }
        listed.push(Listed {
            name: planner.name().to_owned(),
            description: planner.description().to_owned(),
            parameters: planner.parameters(),
            output: None,
            warnings: Vec::new(),
        });
    }
    if args.json {
        let all: Vec<Value> = listed
            .into_iter()
            .map(|t| {
                let mut tool = json!({"name": t.name, "description": t.description,
                                      "parameters": t.parameters});
                if let Some(output) = t.output {
                    tool["output"] = output;
                }
                if !t.warnings.is_empty() {
                    tool["warnings"] = json!(t.warnings);
                }
                tool
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&all)?)?;
    } else {
        for (i, t) in listed.iter().enumerate() {
            if i > 0 {
                outln!()?;
            }
            outln!("{}", t.name)?;
            for line in t.description.lines() {
                outln!("  {line}")?;
            }
            outln!("  parameters: {}", t.parameters)?;
            if let Some(output) = &t.output {
                outln!("  output: {output}")?;
            }
            for warning in &t.warnings {
                outln!("  warning: {warning}")?;
            }
        }
    }
    Ok(Outcome::Ok)
}
