//! `get_weather` and `get_user`: lookups in two fixed tables. Where a person lives is nothing a model
//! can know, so questions about it need the lookup first and the weather after it: a chain of
//! dependent calls.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_core::{FnTool, Tool, ToolAnnotations, ToolError};

/// The weather table: city, temperature (°C), condition.
pub(crate) const WEATHER: &[(&str, i64, &str)] = &[
    ("Tokyo", 18, "sunny"),
    ("London", 12, "rainy"),
    ("Paris", 15, "cloudy"),
    ("New York", 21, "clear"),
    ("Sydney", 24, "sunny"),
    ("Berlin", 10, "overcast"),
    ("Oslo", 3, "snow"),
    ("Cairo", 31, "clear"),
];

/// The company directory: name, city, team.
pub(crate) const USERS: &[(&str, &str, &str)] = &[
    ("Alice", "Tokyo", "research"),
    ("Bob", "London", "sales"),
    ("Carol", "Paris", "design"),
    ("Dave", "Oslo", "support"),
    ("Erin", "Cairo", "engineering"),
    ("Frank", "Sydney", "marketing"),
    ("Grace", "Berlin", "engineering"),
    ("Heidi", "New York", "finance"),
];

/// `get_weather`: the weather of a city, from a fixed table.
pub fn get_weather() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "get_weather",
        "Current weather of a city: JSON {temp (°C), condition, city}. Known cities: Tokyo, London, Paris, New York, Sydney, Berlin, Oslo, Cairo.",
        json!({"type": "object", "properties": {"location": {"type": "string", "description": "City name."}},
               "required": ["location"], "additionalProperties": false}),
        |args: Value, _| async move { weather(args["location"].as_str().unwrap_or_default().trim()) },
    )
    .with_annotations(ToolAnnotations::READ_ONLY)
    .with_output_schema(json!({"type": "object", "properties": {
            "temp": {"type": "integer", "description": "Temperature in °C."},
            "condition": {"type": "string"},
            "city": {"type": "string"}},
        "required": ["temp", "condition", "city"], "additionalProperties": false})))
}

fn weather(location: &str) -> Result<Value, ToolError> {
    WEATHER
        .iter()
        .find(|(city, ..)| city.eq_ignore_ascii_case(location))
        .map(|(city, temp, condition)| json!({"temp": temp, "condition": condition, "city": city}))
        .ok_or_else(|| {
            // A person's name where a city belongs, a wrong argument: say which tool knows where
            // they live.
            if let Some((name, ..)) = USERS.iter().find(|(n, ..)| n.eq_ignore_ascii_case(location)) {
                return ToolError::invalid(format!(
                    "'{name}' is a person, not a city: call get_user with name '{name}' to find the city where {name} lives, then get_weather with that city"
                ));
            }
            let known: Vec<&str> = WEATHER.iter().map(|w| w.0).collect();
            ToolError::failed(format!(
                "no weather data for '{location}' (known cities: {})",
                known.join(", ")
            ))
        })
}

/// `get_user`: a person of a small fixed directory.
pub fn get_user() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "get_user",
        "A person in the company directory: JSON {name, city (where they live), team}.",
        json!({"type": "object", "properties": {"name": {"type": "string", "description": "First name."}},
               "required": ["name"], "additionalProperties": false}),
        |args: Value, _| async move {
            let name = args["name"].as_str().unwrap_or_default().trim();
            USERS
                .iter()
                .find(|(n, ..)| n.eq_ignore_ascii_case(name))
                .map(|(name, city, team)| json!({"name": name, "city": city, "team": team}))
                .ok_or_else(|| {
                    ToolError::failed(format!("no user named '{name}' in the directory"))
                })
        },
    )
    .with_annotations(ToolAnnotations::READ_ONLY)
    .with_output_schema(json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "city": {"type": "string", "description": "Where they live."},
            "team": {"type": "string"}},
        "required": ["name", "city", "team"], "additionalProperties": false})))
}
