//! Model specs as users write them: `local`, `local:PATH.gguf`, `openai:MODEL`, `anthropic:MODEL`,
//! `bedrock:MODEL_ID`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::LlmError;

/// Which model to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// An in-process GGUF model; `None` is the default model in the model cache.
    Local(Option<PathBuf>),
    /// An OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio …).
    OpenAi(String),
    /// Anthropic Messages.
    Anthropic(String),
    /// Amazon Bedrock Converse.
    Bedrock(String),
}

impl FromStr for ModelSpec {
    type Err = LlmError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s == "local" {
            return Ok(ModelSpec::Local(None));
        }
        let (kind, rest) = s.split_once(':').ok_or_else(|| bad_spec(s))?;
        if rest.trim().is_empty() {
            return Err(bad_spec(s));
        }
        let rest = rest.trim().to_owned();
        match kind {
            "local" => Ok(ModelSpec::Local(Some(PathBuf::from(rest)))),
            "openai" => Ok(ModelSpec::OpenAi(rest)),
            "anthropic" => Ok(ModelSpec::Anthropic(rest)),
            "bedrock" => Ok(ModelSpec::Bedrock(rest)),
            _ => Err(bad_spec(s)),
        }
    }
}

fn bad_spec(s: &str) -> LlmError {
    LlmError::Config(format!(
        "unknown model spec {s:?}: use local, local:PATH.gguf, openai:MODEL, anthropic:MODEL or bedrock:MODEL_ID"
    ))
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Local(None) => write!(f, "local"),
            ModelSpec::Local(Some(p)) => write!(f, "local:{}", p.display()),
            ModelSpec::OpenAi(m) => write!(f, "openai:{m}"),
            ModelSpec::Anthropic(m) => write!(f, "anthropic:{m}"),
            ModelSpec::Bedrock(m) => write!(f, "bedrock:{m}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind() {
        assert_eq!("local".parse(), Ok(ModelSpec::Local(None)));
        assert_eq!(
            "local:/m/x.gguf".parse(),
            Ok(ModelSpec::Local(Some("/m/x.gguf".into())))
        );
        assert_eq!(
            "openai:gpt-4o-mini".parse(),
            Ok(ModelSpec::OpenAi("gpt-4o-mini".into()))
        );
        assert_eq!(
            "anthropic:claude-x".parse(),
            Ok(ModelSpec::Anthropic("claude-x".into()))
        );
        assert_eq!(
            "bedrock:anthropic.claude-3-haiku-20240307-v1:0".parse(),
            Ok(ModelSpec::Bedrock(
                "anthropic.claude-3-haiku-20240307-v1:0".into()
            ))
        );
        for bad in ["", "gpt-4o", "openai:", "cohere:x"] {
            assert!(bad.parse::<ModelSpec>().is_err(), "{bad}");
        }
        assert_eq!(ModelSpec::OpenAi("m".into()).to_string(), "openai:m");
    }
}
