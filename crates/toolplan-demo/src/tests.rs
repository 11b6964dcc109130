//! Every demo tool called through the registry, its arguments checked against its schema first.

use std::time::Duration;

use serde_json::{Value, json};
use toolplan_core::{ToolContext, ToolError, ToolResult};

use crate::directory::{USERS, WEATHER};
use crate::registry;

async fn call(name: &str, args: Value) -> ToolResult {
    let r = registry();
    let t = r.get(name).unwrap();
    t.check_arguments(&args)
        .map_err(ToolError::InvalidArguments)?;
    t.tool().call(args, ToolContext::detached()).await
}

#[tokio::test]
async fn all_register() {
    assert_eq!(registry().len(), 8);
}

#[tokio::test]
async fn echo_and_concat() {
    assert_eq!(
        call("echo", json!({"text": "hi"})).await.unwrap(),
        json!("hi")
    );
    assert_eq!(
        call("echo", json!({"text": "{\"a\":1}"})).await.unwrap(),
        json!({"a": 1})
    );
    assert_eq!(
        call("concat", json!({"a": "x", "b": 2})).await.unwrap(),
        json!("x2")
    );
}

#[tokio::test(start_paused = true)]
async fn sleep_returns_value_after_delay() {
    let t0 = tokio::time::Instant::now();
    assert_eq!(
        call("sleep", json!({"ms": 250, "value": [1]}))
            .await
            .unwrap(),
        json!([1])
    );
    assert_eq!(t0.elapsed(), Duration::from_millis(250));
    assert!(call("sleep", json!({"ms": -1})).await.is_err());
}

#[tokio::test]
async fn fail_fails() {
    assert_eq!(
        call("fail", json!({})).await,
        Err(ToolError::failed("this tool always fails"))
    );
    assert_eq!(
        call("fail", json!({"message": "boom"})).await,
        Err(ToolError::failed("boom"))
    );
}

#[tokio::test]
async fn weather_table() {
    assert_eq!(
        call("get_weather", json!({"location": "tokyo"}))
            .await
            .unwrap(),
        json!({"temp": 18, "condition": "sunny", "city": "Tokyo"})
    );
    let err = call("get_weather", json!({"location": "Atlantis"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Atlantis"));
    // A city it does not know is a failure of the lookup, not of the arguments.
    assert!(matches!(err, ToolError::Failed(_)), "{err:?}");
    // A person's name where a city belongs: the arguments are refused, and the error names the
    // tool that knows the city.
    let err = call("get_weather", json!({"location": "alice"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)), "{err:?}");
    let err = err.to_string();
    assert!(
        err.contains("'Alice' is a person") && err.contains("get_user"),
        "{err}"
    );
}

#[tokio::test]
async fn user_directory() {
    assert_eq!(
        call("get_user", json!({"name": " erin "})).await.unwrap(),
        json!({"name": "Erin", "city": "Cairo", "team": "engineering"})
    );
    let err = call("get_user", json!({"name": "Mallory"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Mallory"), "{err}");
    // Every user lives in a city with weather data, so lookups chain into get_weather.
    for (_, city, _) in USERS {
        assert!(WEATHER.iter().any(|(c, ..)| c == city), "{city}");
    }
}

#[tokio::test]
async fn calculator() {
    assert_eq!(
        call("calculator", json!({"expression": "(18 + 12) / 2"}))
            .await
            .unwrap(),
        json!(15)
    );
    assert_eq!(
        call("calculator", json!({"expression": "7/2"}))
            .await
            .unwrap(),
        json!(3.5)
    );
    assert_eq!(
        call("calculator", json!({"expression": "2^10"}))
            .await
            .unwrap(),
        json!(1024)
    );
    // Results read as people write them: no floating-point noise in the last digits.
    for (expression, expected) in [
        ("(20 * 9 / 5) + 33.8", json!(69.8)),
        ("0.1 + 0.2", json!(0.3)),
        ("1/3", json!(0.333333333333)),
        ("21 * 9 / 5 + 32", json!(69.8)),
        ("0.00000000000000000001 * 3", json!(3e-20)),
    ] {
        assert_eq!(
            call("calculator", json!({"expression": expression}))
                .await
                .unwrap(),
            expected,
            "{expression}"
        );
    }
    // No finite result: the tool failed on a well-formed expression.
    let err = call("calculator", json!({"expression": "1/0"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Failed(_)), "{err:?}");
    // An expression that does not parse (a city where a number belongs) is refused.
    let err = call("calculator", json!({"expression": "Cairo - Oslo"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("'Cairo' and 'Oslo' are not numbers")
            && err.contains("must be looked up first"),
        "{err}"
    );
    for expression in ["2 +* x(", "Cairo - Oslo"] {
        let err = call("calculator", json!({"expression": expression}))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidArguments(m) if m.contains("cannot evaluate")),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn compare() {
    let out = call(
        "compare_data",
        json!({"data_a": {"temp": 18, "city": "Tokyo", "x": 1}, "data_b": {"temp": 12, "city": "London", "x": 1}}),
    )
    .await
    .unwrap();
    assert_eq!(out["equal"], json!(false));
    assert_eq!(out["same"], json!(["x"]));
    assert_eq!(out["different"]["temp"]["difference"], json!(6));
    let out = call("compare_data", json!({"data_a": 1, "data_b": 1}))
        .await
        .unwrap();
    assert_eq!(out["equal"], json!(true));
    let out = call("compare_data", json!({"data_a": 31, "data_b": 3}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"equal": false, "a": 31, "b": 3, "difference": 28})
    );
    let out = call("compare_data", json!({"data_a": "x", "data_b": 3}))
        .await
        .unwrap();
    assert_eq!(out, json!({"equal": false, "a": "x", "b": 3}));
}
