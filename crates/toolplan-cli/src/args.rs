//! The command line, defined once: clap derives parsing and `--help` from these types.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Tool planning for LLM agents: validate a plan (a DAG of tool calls whose arguments reference earlier
/// results), run every independent step at once, and report only the results asked for.
#[derive(Debug, Parser)]
#[command(name = "toolplan", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Trust a toolplan.toml found in the current directory (not named with --config): start the
    /// commands of its mcp_servers entries, connect to their URLs, and send model requests to its
    /// base_url. Also TOOLPLAN_TRUST_CONFIG=1. A file named with --config is always trusted.
    #[arg(long, global = true)]
    pub trust_config: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate and run a tool plan, then print its results (exit 2 if the plan is invalid).
    Run(RunArgs),
    /// Check a tool plan without running anything (exit 2 if it is invalid).
    Validate(ValidateArgs),
    /// List the tools a plan can call, with their descriptions and argument schemas.
    Tools(ToolsArgs),
    /// Ask an agent a question: the model calls the tools, through one plan when planning is on.
    Ask(AskArgs),
    /// Run a query plan (LlamaIndex's QueryPlanTool format): leaves ask tools, branches are
    /// answered from their children by the synthesizer; prints the root's answer.
    QueryPlan(QueryPlanArgs),
    /// Manage search indices (embedded, or on an OpenSearch cluster): create from a mapping, bulk
    /// load, list, delete.
    Index(IndexArgs),
    /// Run an OpenSearch query DSL body on an index and print the OpenSearch-shaped response.
    Search(SearchArgs),
    /// Turn a question into OpenSearch query DSL for an index with a model (QueryPlanningTool),
    /// checked against the mapping; optionally run it.
    Dsl(DslArgs),
    /// Store, show or delete search templates (OpenSearch stored scripts) that
    /// `toolplan dsl --template ID=DESCRIPTION` offers the model.
    Template(TemplateArgs),
    /// Serve toolplan to MCP clients (stdio, or streamable HTTP with --http): execute_tool_plan
    /// over every tool — the tool set, and the tools of the config's `[[mcp_servers]]` — and, when
    /// the config names a model, query_plan_tool (and query_planning with --tools search).
    Mcp(McpArgs),
}

/// The built-in tool sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolSet {
    /// Deterministic demo tools: echo, concat, sleep, fail, get_weather, get_user, calculator,
    /// compare_data.
    Demo,
    /// No built-in tools (for use with --docs).
    None,
    /// Agentic search over the embedded backend's default data directory ($TOOLPLAN_DATA_DIR, else
    /// per user): list_indices, index_mapping, search_index, count_index, multi_search (`ask` adds
    /// query_planning).
    Search,
}

/// Which tools plans run against.
#[derive(Debug, Args)]
pub struct ToolsSelection {
    /// The built-in tool set plans may call (default: the config file's `tools`, else demo when
    /// the config names no MCP servers, else none).
    #[arg(long = "tools", value_enum)]
    pub tools: Option<ToolSet>,
    /// The configuration file (default: ./toolplan.toml if it exists): its `[[mcp_servers]]` add
    /// their tools.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Where a plan comes from, and limits on its size.
#[derive(Debug, Args)]
pub struct PlanInput {
    /// The plan file (JSON); `-` reads standard input.
    #[arg(value_name = "PLAN.json")]
    pub plan: PathBuf,
    /// Most steps a plan may have (default: `[limits] max_steps` of the config file, else 10000).
    #[arg(long, value_name = "N")]
    pub max_steps: Option<usize>,
}

/// `toolplan run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub input: PlanInput,
    #[command(flatten)]
    pub tools: ToolsSelection,
    /// Print one JSON object: outputs, errors, waves, elapsed_ms, steps, outcome.
    #[arg(long)]
    pub json: bool,
    /// Most tool calls running at once (default: `[limits] concurrency` of the config file, else
    /// 64).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: Option<u32>,
    /// Most calls of one tool running at once, as TOOL=N (repeatable).
    #[arg(long = "tool-limit", value_name = "TOOL=N", value_parser = parse_tool_limit)]
    pub tool_limits: Vec<(String, usize)>,
    /// Longest one tool call may take (e.g. 500ms, 30s, 2m); `none` for no limit (default:
    /// `[limits] step_timeout` of the config file, else 5m).
    #[arg(long, value_name = "DUR", value_parser = parse_optional_duration)]
    pub step_timeout: Option<OptionalDuration>,
    /// Longest the whole plan may take; steps still running then fail, the rest are skipped
    /// (default: `[limits] deadline` of the config file, else none).
    #[arg(long, value_name = "DUR", value_parser = parse_optional_duration)]
    pub deadline: Option<OptionalDuration>,
    /// When a step may start: as soon as its dependencies finished, or only after the whole previous
    /// wave finished (for comparison with wave executors).
    #[arg(long, value_enum, default_value = "dependency")]
    pub schedule: ScheduleArg,
    /// Which plans need your approval on the terminal before they run, shown whole (default:
    /// `[limits] confirm` of the config file, else never).
    #[arg(long, value_enum, value_name = "WHICH")]
    pub confirm: Option<ConfirmArg>,
    /// No live progress display, even on a terminal.
    #[arg(long)]
    pub quiet: bool,
    /// With `-` (standard input), read the whole plan before running it. By default a plan piped in
    /// runs while it is written: each step joins when its text is complete, and a step on a
    /// read-only tool whose references are done starts at once.
    #[arg(long)]
    pub no_stream: bool,
}

/// `toolplan validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub input: PlanInput,
    #[command(flatten)]
    pub tools: ToolsSelection,
    /// Print one JSON object: {"valid", "steps", "waves"} or {"valid": false, "problems"}.
    #[arg(long)]
    pub json: bool,
}

/// `toolplan tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    #[command(flatten)]
    pub tools: ToolsSelection,
    /// Print a JSON array of {name, description, parameters}, with output when the tool declares
    /// an output schema, and warnings when a schema contradicted itself (the parameters are then
    /// its consistent reading).
    #[arg(long)]
    pub json: bool,
    /// Also list the execute_tool_plan meta-tool as an LLM would see it: offered beside the tools
    /// (as the MCP server offers it), or with --plan-listing as `toolplan ask --plan-only` offers it
    /// alone.
    #[arg(long)]
    pub with_planner: bool,
    /// How the listed execute_tool_plan lists the tools, as `toolplan ask --plan-only
    /// --plan-listing FORM` does (that option's default there is documented): what the model reads
    /// in plan-only mode.
    #[arg(long, value_enum, value_name = "FORM", requires = "with_planner")]
    pub plan_listing: Option<PlanListing>,
    /// Tools declared by a JSON file, as `toolplan ask --tool-defs` reads them (an array of {name,
    /// description, parameters}, OpenAI's or MCP's tool format), listed after their schemas are
    /// read: a schema that contradicts itself is shown in its consistent reading, with a warning.
    /// The built-in tool set then defaults to none.
    #[arg(long, value_name = "FILE")]
    pub tool_defs: Option<PathBuf>,
}

/// `toolplan ask`.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question.
    pub question: String,
    /// The model: local (the default model, offline), local:PATH.gguf, openai:MODEL,
    /// anthropic:MODEL or bedrock:MODEL_ID. Default: the config file's, else local.
    #[arg(long, value_name = "SPEC")]
    pub model: Option<String>,
    /// Endpoint for openai/anthropic models: any compatible server (Ollama, vLLM, llama.cpp
    /// server, LM Studio, a proxy).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The built-in tool set the agent may call (default: the config file's `tools`, else demo
    /// when the config names no MCP servers, else none).
    #[arg(long, value_enum)]
    pub tools: Option<ToolSet>,
    /// Do not offer execute_tool_plan: one model round-trip per tool call.
    #[arg(long)]
    pub no_plan: bool,
    /// Offer only execute_tool_plan (listing every tool's arguments): every tool use is a plan.
    /// With the local model and no planning flag, ask plans as `--plan-only --answer-in-plan
    /// --results-answer` do (what scores best with it: bench/README.md).
    #[arg(long, conflicts_with = "no_plan")]
    pub plan_only: bool,
    /// Offer execute_tool_plan beside the tools, the model choosing between a plan and direct
    /// calls: the default with hosted models (with the local model, the default is
    /// `--plan-only --answer-in-plan --results-answer`).
    #[arg(long, conflicts_with_all = ["no_plan", "plan_only"])]
    pub plan_beside: bool,
    /// How the planner lists the tools with --plan-only: documented (the default: each signature
    /// with a line per argument: description, format, bounds, default), signatures (one line each),
    /// schemas (each tool's JSON Schema) or native (the tools shown as tools, not callable).
    #[arg(long, value_enum, value_name = "FORM", requires = "plan_only")]
    pub plan_listing: Option<PlanListing>,
    /// Give plans an `answer` field whose text (results inserted by $ref) is the answer: a plan
    /// whose steps all succeed then needs no second model call.
    #[arg(long, conflicts_with = "no_plan")]
    pub answer_in_plan: bool,
    /// Run a plan only once the model has written all of it. By default a plan runs while it is
    /// written: each step on a read-only tool starts as soon as its text and the steps it refers
    /// to are complete (the rest when the reply is done), so tools overlap the model's writing.
    #[arg(long)]
    pub no_stream: bool,
    /// After a plan whose steps all succeeded, ask for the answer compactly: the instructions, the
    /// question, the plan and its results, and one tool (call_more_tools) for when they do not
    /// answer the question, instead of the whole conversation and every tool again (fewer input
    /// tokens; with the local 1.5B model, fewer right answers: see bench/README.md).
    #[arg(long, conflicts_with = "no_plan")]
    pub compact_answer: bool,
    /// Answer with a plan's results, written out, when its steps all succeeded and it brings no
    /// answer of its own: no model call after the plan. Not for a question that asks for a
    /// judgement on the results (yes or no, one of named options), which the model answers.
    #[arg(long, conflicts_with = "no_plan")]
    pub results_answer: bool,
    /// The planner offered to the model: tool-plan (execute_tool_plan beside the tools) or
    /// query-plan (query_plan_tool only: a DAG of sub-questions, branches answered by the model).
    #[arg(long, value_enum, default_value = "tool-plan", conflicts_with_all = ["no_plan", "plan_only", "plan_beside"])]
    pub planner: PlannerArg,
    /// Also offer one document tool per .md/.txt file of this folder (answers with the file's
    /// best-matching passages).
    #[arg(long, value_name = "DIR")]
    pub docs: Option<PathBuf>,
    /// Most model turns (default: the config file's, else 8).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<usize>,
    /// How many times a plan that fails validation is sent back with the request to fix it, the
    /// model then made to call a tool (0: the model decides whether to try again).
    #[arg(long, value_name = "N", default_value_t = toolplan_agent::DEFAULT_REPAIRS)]
    pub repairs: usize,
    /// More instructions for the model (house rules, a persona, a benchmark's system turn): added
    /// after toolplan's own and the config file's `instructions`, never in their place.
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,
    /// The configuration file (default: ./toolplan.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print one JSON object: answer, llm_calls, input_tokens, output_tokens, tool_calls, plans,
    /// plan_steps, turns, tool_errors, elapsed_ms, model, planning (and error when there is no
    /// answer; calls and plan_problems with --dry-run).
    #[arg(long)]
    pub json: bool,
    /// Ask the model once and show what it asks for (its tool calls, and each plan with the problems
    /// that would stop it), running nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Which plans (and direct tool calls) need your approval on the terminal before they run,
    /// each plan shown whole (default: `[limits] confirm` of the config file, else never).
    #[arg(long, value_enum, value_name = "WHICH")]
    pub confirm: Option<ConfirmArg>,
    /// Tools declared by a JSON file, with no implementation (for --dry-run): an array of
    /// {name, description, parameters}, of OpenAI's {"type": "function", "function": {...}} or of
    /// MCP's {name, description, inputSchema}. The built-in tool set then defaults to none.
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    pub tool_defs: Option<PathBuf>,
    /// Print the conversation (tool calls and results) on standard error.
    #[arg(long, short)]
    pub verbose: bool,
}

/// How `execute_tool_plan` lists the tools when it is offered alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanListing {
    /// `name(arg: type, optional?: type): what it does`.
    Signatures,
    /// Signatures, and a line per argument with what its schema says beyond the type.
    Documented,
    /// Each tool's name, JSON Schema and description.
    Schemas,
    /// The tools shown in the model's own tool format, but not callable: only execute_tool_plan
    /// can be called.
    Native,
}

/// The planner `toolplan ask` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlannerArg {
    /// execute_tool_plan: steps with `$ref` data flow.
    ToolPlan,
    /// query_plan_tool: a DAG of sub-questions with LLM synthesis.
    QueryPlan,
}

/// How a query plan's branches combine their children's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SynthesizerArg {
    /// Every child in one prompt; over the context budget, later chunks refine the answer.
    Compact,
    /// Chunks answered in parallel, then combined, level by level.
    #[value(name = "tree_summarize", alias = "tree-summarize")]
    TreeSummarize,
    /// The children's answers joined as `Query: …\nResponse: …`; no model.
    Concat,
}

/// `toolplan query-plan`.
#[derive(Debug, Args)]
pub struct QueryPlanArgs {
    #[command(flatten)]
    pub input: PlanInput,
    /// The built-in tool set leaves may call (default: the config file's `tools`, else demo when
    /// the config names no MCP servers, else none).
    #[arg(long = "tools", value_enum)]
    pub tools: Option<ToolSet>,
    /// Also one document tool per .md/.txt file of this folder, named after the file.
    #[arg(long, value_name = "DIR")]
    pub docs: Option<PathBuf>,
    /// How branches combine their children's answers (compact and tree_summarize use the model).
    #[arg(long, value_enum, default_value = "compact")]
    pub synthesizer: SynthesizerArg,
    /// The synthesizer's model: local, local:PATH.gguf, openai:MODEL, anthropic:MODEL or
    /// bedrock:MODEL_ID. Default: the config file's, else local. Not loaded for concat.
    #[arg(long, value_name = "SPEC")]
    pub model: Option<String>,
    /// Endpoint for openai/anthropic models.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Characters of child answers per synthesis prompt; more are refined in (compact) or
    /// summarized level by level (tree_summarize).
    #[arg(long, value_name = "CHARS", default_value_t = toolplan_query::synthesize::DEFAULT_CONTEXT_BUDGET)]
    pub context_budget: usize,
    /// Longest one tool call or synthesis may take (e.g. 30s, 2m); `none` for no limit (default:
    /// `[limits] step_timeout` of the config file, else 5m).
    #[arg(long, value_name = "DUR", value_parser = parse_optional_duration)]
    pub step_timeout: Option<OptionalDuration>,
    /// The configuration file (default: ./toolplan.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print one JSON object: answer (or error), root, nodes, tool_calls, llm_calls, input_tokens,
    /// output_tokens, elapsed_ms, synthesizer.
    #[arg(long)]
    pub json: bool,
    /// Print each node's question and answer on standard error as it completes.
    #[arg(long, short)]
    pub verbose: bool,
    /// With `-`, read the whole plan before running it. By default a plan piped in runs while it
    /// is written: each node joins when its text is complete, and a node whose tool is read-only
    /// (the synthesizer and the document tools are) starts once its children are answered.
    #[arg(long)]
    pub no_stream: bool,
}

/// Which search backend, and where it keeps its data.
#[derive(Debug, Args)]
pub struct BackendArgs {
    /// The search backend: the embedded on-disk index, or an OpenSearch cluster (--url).
    #[arg(long, value_enum, default_value = "embedded", global = true)]
    pub backend: BackendKind,
    /// The embedded backend's data directory (default: $TOOLPLAN_DATA_DIR, else
    /// $XDG_DATA_HOME/toolplan/indices, else ~/.local/share/toolplan/indices).
    #[arg(long, value_name = "DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// The OpenSearch cluster's URL (default: $OPENSEARCH_URL). Credentials come from the
    /// environment: OPENSEARCH_API_KEY, or OPENSEARCH_USER and OPENSEARCH_PASSWORD.
    #[arg(long, value_name = "URL", global = true)]
    pub url: Option<String>,
    /// Accept a cluster certificate that no trusted authority signed (test clusters only).
    #[arg(long, global = true)]
    pub insecure: bool,
}

/// The search backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// On-disk indices in the data directory; no server.
    Embedded,
    /// An OpenSearch cluster over its REST API.
    Opensearch,
}

/// `toolplan index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    #[command(subcommand)]
    pub action: IndexAction,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// What `toolplan index` does.
#[derive(Debug, Subcommand)]
pub enum IndexAction {
    /// Create an index from an OpenSearch mapping ({"mappings": {"properties": …}} or
    /// {"properties": …}), with its "settings" if the file has them (the embedded engine reads
    /// the limits among them, such as index.max_result_window, and refuses the others by name).
    Create {
        /// The index name (lower case, no spaces or / \\ * ? " < > | , # :).
        name: String,
        /// The mapping file (JSON).
        #[arg(long, value_name = "FILE")]
        mapping: PathBuf,
    },
    /// Print an index's mapping (with the fields its documents added), or add to it with
    /// --update (OpenSearch's put-mapping: new fields and sub-fields, root options such as dynamic).
    Mapping {
        /// The index name.
        name: String,
        /// A mapping update to apply first (JSON: {"properties": …}); `-` reads stdin.
        #[arg(long, value_name = "FILE")]
        update: Option<PathBuf>,
    },
    /// Load an OpenSearch _bulk NDJSON file (index / create / delete actions); `-` reads stdin.
    /// An index that does not exist is created; fields the mapping lacks are mapped from their
    /// values (dynamic mapping).
    Bulk {
        /// The NDJSON file.
        #[arg(value_name = "FILE.ndjson")]
        file: PathBuf,
        /// The index for actions without an _index.
        #[arg(long, value_name = "NAME")]
        index: Option<String>,
    },
    /// List the indices and their document counts.
    List {
        /// Print a JSON array of {"index", "docs"}.
        #[arg(long)]
        json: bool,
    },
    /// Delete an index and its documents.
    Delete {
        /// The index name.
        name: String,
    },
    /// Point an alias at indices (OpenSearch's put-alias), or take it off them with --remove.
    /// Searches through the alias search its indices (filtered by --filter); writes through it
    /// go to its write index, or to its one index.
    Alias {
        /// The alias name (an index name's rules; no index may have it).
        alias: String,
        /// The indices: a name, a comma list or a pattern.
        #[arg(long, value_name = "INDICES")]
        index: String,
        /// A query every search through the alias is filtered by (JSON, e.g.
        /// '{"term": {"level": "error"}}').
        #[arg(long, value_name = "JSON", conflicts_with = "remove")]
        filter: Option<String>,
        /// Make these the alias's write index.
        #[arg(long, conflicts_with = "remove")]
        write_index: bool,
        /// Take the alias off the indices instead.
        #[arg(long)]
        remove: bool,
    },
    /// Print the aliases of indices as JSON, as OpenSearch's get-alias API does (each index with its
    /// aliases and their options).
    Aliases {
        /// The indices: a name, an alias, a comma list or a pattern.
        #[arg(default_value = "_all")]
        index: String,
    },
}

/// `toolplan search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The index.
    pub index: String,
    /// The search body: JSON text, or @FILE to read it from a file (default: match_all).
    #[arg(long, value_name = "JSON|@FILE")]
    pub dsl: Option<String>,
    /// A query string in Lucene syntax (`title:fox AND year:>2000`), OpenSearch's `q=`: it
    /// replaces the body's query.
    #[arg(short = 'q', long = "q", value_name = "QUERY")]
    pub q: Option<String>,
    /// Print only the parts of the response these paths name, as OpenSearch's `filter_path`:
    /// comma-separated, `*` and `**` wildcards, `-path` to leave one out
    /// (`hits.hits._source,hits.total.value`).
    #[arg(long, value_name = "PATHS")]
    pub filter_path: Option<String>,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// `toolplan dsl`.
#[derive(Debug, Args)]
pub struct DslArgs {
    /// The question, in natural language.
    pub question: String,
    /// The index the DSL is for.
    #[arg(long, value_name = "NAME")]
    pub index: String,
    /// The model: local, local:PATH.gguf, openai:MODEL, anthropic:MODEL or bedrock:MODEL_ID.
    /// Default: the config file's, else local.
    #[arg(long, value_name = "SPEC")]
    pub model: Option<String>,
    /// Endpoint for openai/anthropic models.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Fields to prefer, comma-separated.
    #[arg(long, value_name = "FIELDS", value_delimiter = ',')]
    pub query_fields: Vec<String>,
    /// The embedding model id passed to the prompt (for neural queries on a cluster).
    #[arg(long, value_name = "ID")]
    pub embedding_model_id: Option<String>,
    /// The query used when no valid DSL comes back (JSON; default {"size":10,"query":{"match_all":{}}}).
    #[arg(long, value_name = "JSON")]
    pub fallback_query: Option<String>,
    /// How many times problems go back to the model before the fallback is used.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub max_repairs: usize,
    /// Do not correct mistakes that have one right correction (genre.keyword on a keyword field,
    /// term on analysed text, range with eq, sort inside the query) before checking.
    #[arg(long)]
    pub no_autofix: bool,
    /// Do not show the model the frequent values of the index's keyword fields (found with one
    /// terms aggregation), so it spells values as it likes.
    #[arg(long)]
    pub no_values: bool,
    /// Do not run a valid query once to check it against the question (no hits, a named value
    /// ignored, a copied sample value, a missing aggregation) before it is returned.
    #[arg(long)]
    pub no_observe: bool,
    /// Run the query once to check it, but send what was observed back to the model without first
    /// correcting what the planner can correct itself (a filter on a named value, an aggregation).
    #[arg(long)]
    pub no_amend: bool,
    /// A stored search template the model may pick (repeatable); turns on user_templates
    /// generation: a first call picks one, its stored body guides the query.
    #[arg(long = "template", value_name = "ID=DESCRIPTION", value_parser = parse_template)]
    pub templates: Vec<(String, String)>,
    /// A JSONPath selecting the DSL text in the provider's raw response
    /// (e.g. `$.choices[0].message.content`, `$.output.message.content[0].text`).
    #[arg(long, value_name = "JSONPATH")]
    pub response_filter: Option<String>,
    /// Any QueryPlanningTool parameter (repeatable): query_planner_system_prompt,
    /// query_planner_user_prompt, template_selection_system_prompt, template_selection_user_prompt,
    /// generation_type, or a value for ${parameters.NAME} in custom prompts. VALUE may be @FILE.
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, String)>,
    /// Also run the DSL and print the response.
    #[arg(long)]
    pub execute: bool,
    /// Print one JSON object: dsl, attempts (reply, dsl, problems), fallback, llm_calls,
    /// input_tokens, output_tokens, and with --execute the response.
    #[arg(long)]
    pub json: bool,
    /// The configuration file (default: ./toolplan.toml if it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// `toolplan mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub tools: ToolsSelection,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio; a port alone binds 127.0.0.1.
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub http: Option<String>,
    /// The environment variable holding a bearer token every HTTP request must carry
    /// (Authorization: Bearer …). Required to bind an address other than loopback.
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
    /// Also offer every tool itself beside execute_tool_plan.
    #[arg(long)]
    pub expose_tools: bool,
    /// Longest one step (or directly called tool) may take (e.g. 30s, 2m, none) [default:
    /// `[limits] step_timeout` of the configuration, else 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse_optional_duration)]
    pub step_timeout: Option<OptionalDuration>,
    /// Longest one request's plan (or direct call) may take; steps still running then fail
    /// [default: `[limits] deadline` of the configuration, else 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse_optional_duration)]
    pub deadline: Option<OptionalDuration>,
    /// Which plans (and direct tool calls) need approval before they run: the client that sent
    /// each is asked, with the whole plan, through MCP elicitation; a client that does not
    /// support it gets the plan declined (default: `[limits] confirm` of the configuration,
    /// else never).
    #[arg(long, value_enum, value_name = "WHICH")]
    pub confirm: Option<ConfirmArg>,
    /// Most tool calls (plans and direct calls, of all clients) running at once; a call beyond
    /// them fails at once, saying so.
    #[arg(long, value_name = "N", default_value_t = toolplan_mcp::server::DEFAULT_MAX_CALLS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_calls: u32,
    /// Most HTTP sessions open at once; an `initialize` beyond them gets HTTP 503.
    #[arg(long, value_name = "N", default_value_t = toolplan_mcp::server::DEFAULT_MAX_SESSIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_sessions: u32,
    /// An HTTP session without requests (or messages of its running plans) for this long is ended,
    /// with its plans; keep it longer than --deadline (e.g. 30s, 10m, none).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_optional_duration)]
    pub session_idle: OptionalDuration,
    /// A browser origin (scheme://host[:port|:*]) whose pages may call the HTTP server besides
    /// loopback ones (repeatable); requests with any other `Origin` get HTTP 403.
    #[arg(long = "allow-origin", value_name = "URL", value_parser = parse_origin)]
    pub allow_origins: Vec<String>,
    /// A plan whose HTTP client went away (closed the response stream) is cancelled when the
    /// client does not come back to its session within this time (e.g. 10s, none).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_optional_duration)]
    pub disconnect_grace: OptionalDuration,
}

fn parse_origin(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or("expected an origin like https://app.example.com or http://host:8080")?;
    if rest.is_empty() || rest.contains('/') {
        return Err("expected scheme://host[:port], without a path".into());
    }
    Ok(s.to_owned())
}

/// `toolplan template`.
#[derive(Debug, Args)]
pub struct TemplateArgs {
    #[command(subcommand)]
    pub action: TemplateAction,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// What `toolplan template` does.
#[derive(Debug, Subcommand)]
pub enum TemplateAction {
    /// Store a search template: its body (a query DSL object, may hold mustache placeholders) or a
    /// whole script {"script": {"lang": "mustache", "source": …}}.
    Put {
        /// The template id (letters, digits, _ - .).
        id: String,
        /// The template: JSON, or @FILE.
        #[arg(long, value_name = "JSON|@FILE")]
        source: String,
    },
    /// Print a stored template's script as JSON.
    Get {
        /// The template id.
        id: String,
    },
    /// Delete a stored template.
    Delete {
        /// The template id.
        id: String,
    },
}

fn parse_template(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((id, d)) if !id.trim().is_empty() && !d.trim().is_empty() => {
            Ok((id.trim().to_owned(), d.trim().to_owned()))
        }
        _ => Err("expected ID=DESCRIPTION, both non-blank".into()),
    }
}

fn parse_param(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, v)) if !name.trim().is_empty() => Ok((name.trim().to_owned(), v.to_owned())),
        _ => Err("expected NAME=VALUE".into()),
    }
}

/// Which plans need approval before they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfirmArg {
    /// None.
    Never,
    /// Plans with a step on a tool that may change or destroy something (MCP's
    /// `destructiveHint`; a tool that says neither read-only nor non-destructive counts).
    Destructive,
    /// Every plan.
    All,
}

impl From<PlanListing> for toolplan_planner::ToolListing {
    fn from(arg: PlanListing) -> Self {
        use toolplan_planner::ToolListing;
        match arg {
            PlanListing::Signatures => ToolListing::Signatures,
            PlanListing::Documented => ToolListing::Documented,
            PlanListing::Schemas => ToolListing::Schemas,
            PlanListing::Native => ToolListing::Native,
        }
    }
}

impl From<ConfirmArg> for toolplan_core::approval::Confirm {
    fn from(arg: ConfirmArg) -> Self {
        use toolplan_core::approval::Confirm;
        match arg {
            ConfirmArg::Never => Confirm::Never,
            ConfirmArg::Destructive => Confirm::Destructive,
            ConfirmArg::All => Confirm::All,
        }
    }
}

/// When steps may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScheduleArg {
    /// As soon as the step's last dependency finished.
    Dependency,
    /// Only after every step of the previous wave finished.
    WaveBarrier,
}

/// A duration, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalDuration(pub Option<Duration>);

fn parse_optional_duration(s: &str) -> Result<OptionalDuration, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(OptionalDuration(None));
    }
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{e} (examples: 500ms, 30s, 2m, none)"))?;
    if d.is_zero() {
        return Err("must be more than zero (or `none`)".into());
    }
    Ok(OptionalDuration(Some(d)))
}

fn parse_tool_limit(s: &str) -> Result<(String, usize), String> {
    let (tool, n) = s
        .split_once('=')
        .ok_or("expected TOOL=N, e.g. get_weather=2")?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| format!("'{n}' is not a whole number"))?;
    if tool.trim().is_empty() || n == 0 {
        return Err("expected TOOL=N with a tool name and N of at least 1".into());
    }
    Ok((tool.trim().to_owned(), n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_and_limits() {
        assert_eq!(parse_optional_duration("none"), Ok(OptionalDuration(None)));
        assert_eq!(
            parse_optional_duration("250ms"),
            Ok(OptionalDuration(Some(Duration::from_millis(250))))
        );
        assert!(parse_optional_duration("0s").is_err());
        assert!(parse_optional_duration("soon").is_err());
        assert_eq!(parse_tool_limit("sleep=2"), Ok(("sleep".into(), 2)));
        assert!(parse_tool_limit("sleep").is_err());
        assert!(parse_tool_limit("sleep=0").is_err());
        assert!(parse_tool_limit("=3").is_err());
    }
}
