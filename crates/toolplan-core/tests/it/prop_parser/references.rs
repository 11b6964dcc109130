//! `$ref` resolution: whole-value insertion and text interpolation give exactly the value at the path, through a template and through a real run; splitting text into pieces is lossless.

use super::*;

// ---------------------------------------------------------------------------------------------------
// Property 4: reference resolution
// ---------------------------------------------------------------------------------------------------

/// JSON outputs whose keys are mostly usable as path segments.
pub(super) fn output_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        ".{0,8}".prop_map(Value::String),
        Just(json!("line\n\"quoted\"\\ tab\t")),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (prop_oneof![4 => "[a-z0-9_-]{1,3}", 1 => ".{0,4}"], inner),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
    .boxed()
}

/// One step of a path: which way to go at each level.
#[derive(Debug, Clone)]
pub(super) enum Seg {
    /// An existing key or index (by position), written as a positive index for arrays.
    Existing(Index),
    /// An existing array element written as a negative index, or an object key by position.
    FromEnd(Index),
    /// Any segment text.
    Random(String),
}

pub(super) fn seg() -> impl Strategy<Value = Seg> {
    prop_oneof![
        5 => any::<Index>().prop_map(Seg::Existing),
        2 => any::<Index>().prop_map(Seg::FromEnd),
        2 => prop_oneof!["[A-Za-z0-9_-]{1,4}", "-?[0-9]{1,3}", Just("-0".to_owned())]
            .prop_map(Seg::Random),
    ]
}

/// Turns path choices into segments by walking `output`.
pub(super) fn build_path(output: &Value, choices: &[Seg]) -> Vec<String> {
    let mut cur = Some(output);
    let mut path = Vec::new();
    for c in choices {
        let s = match (cur, c) {
            (Some(Value::Object(m)), Seg::Existing(ix) | Seg::FromEnd(ix)) if !m.is_empty() => {
                let k = m.keys().nth(ix.index(m.len())).unwrap().clone();
                if reference::is_valid_id(&k) {
                    k
                } else {
                    "k".to_owned()
                }
            }
            (Some(Value::Array(a)), Seg::Existing(ix)) if !a.is_empty() => {
                ix.index(a.len()).to_string()
            }
            (Some(Value::Array(a)), Seg::FromEnd(ix)) if !a.is_empty() => {
                format!("-{}", a.len() - ix.index(a.len()))
            }
            (_, Seg::Random(s)) => s.clone(),
            _ => "zz".to_owned(),
        };
        cur = walk_one(cur, &s);
        path.push(s);
    }
    path
}

/// The documented lookup of one segment: object member by key; array element by index when the
/// segment is an integer, negative counting from the end.
pub(super) fn walk_one<'v>(cur: Option<&'v Value>, seg: &str) -> Option<&'v Value> {
    match cur? {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => {
            let i = if let Some(back) = seg.strip_prefix('-') {
                let back: usize = back.parse().ok()?;
                if back == 0 || back > a.len() {
                    return None;
                }
                a.len() - back
            } else {
                seg.parse::<usize>().ok()?
            };
            a.get(i)
        }
        _ => None,
    }
}

/// What a reference must resolve to: `Err` for a path on a text output, else the value or `None`.
/// The model of `reference::follow`: a path into text, a number or a boolean (the whole output or a
/// value on the way) is an error; a missing field, index or null on the way gives `None`.
pub(super) fn expected(output: &Value, path: &[String]) -> Result<Option<Value>, ()> {
    let mut cur = Some(output);
    for s in path {
        if matches!(
            cur,
            Some(Value::String(_) | Value::Number(_) | Value::Bool(_))
        ) {
            return Err(());
        }
        cur = walk_one(cur, s);
    }
    Ok(cur.cloned())
}

pub(super) fn as_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => serde_json::to_string(other).unwrap(),
        None => "null".to_owned(),
    }
}

pub(super) fn ref_text(step: &str, path: &[String]) -> String {
    let mut s = format!("$ref:{step}");
    for p in path {
        s.push('.');
        s.push_str(p);
    }
    s
}

/// Text around references: no `$`, and never starting with an id character or `.` + id character,
/// so that it cannot extend the reference before it.
pub(super) fn separator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[ ,;:!<>()\\[\\]{}\"'][a-z .]{0,4}",
        Just(".".to_owned()),
        Just(". end".to_owned()),
        Just("..".to_owned()),
    ]
}

/// Returns a fixed output.
pub(super) fn constant(value: Value) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "const",
        "returns a fixed value",
        json!({"type": "object"}),
        move |_, _| {
            let value = value.clone();
            async move { Ok(value) }
        },
    ))
}

/// Records the arguments it is called with.
pub(super) fn capture(seen: Arc<Mutex<Vec<Value>>>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "capture",
        "records its arguments",
        json!({"type": "object"}),
        move |arguments, _| {
            seen.lock().unwrap().push(arguments);
            async { Ok(json!("captured")) }
        },
    ))
}

proptest! {
    #![proptest_config(cases(256))]

    /// `$ref` paths: whole-value insertion gives exactly the sub-value at the path (or null), text
    /// interpolation renders text raw and everything else as compact JSON; both through a template and
    /// through a real plan run.
    #[test]
    fn references_resolve_to_the_value_at_the_path(
        (output, choices) in output_json().prop_flat_map(|o| {
            (Just(o), prop::collection::vec(prop::collection::vec(seg(), 0..5), 1..4))
        }),
        step in prop_oneof![Just("src".to_owned()), "[A-Za-z0-9_-]{1,6}"],
        pre in "[a-z <>:]{1,4}",
        seps in prop::collection::vec(separator(), 3),
    ) {
        prop_assume!(step != "t");
        let paths: Vec<Vec<String>> = choices.iter().map(|c| build_path(&output, c)).collect();
        let wants: Vec<Result<Option<Value>, ()>> =
            paths.iter().map(|p| expected(&output, p)).collect();

        // The interpolated string: pre, then each reference followed by its separator.
        let mut text = pre.clone();
        for (k, p) in paths.iter().enumerate() {
            text.push_str(&ref_text(&step, p));
            text.push_str(&seps[k]);
        }
        let whole: Vec<Value> = paths.iter().map(|p| json!(ref_text(&step, p))).collect();
        let args = json!({"whole": whole, "text": text});

        // Parsing: each whole reference is one typed reference with exactly that path.
        let mut template = Template::compile(args.clone());
        let mut seen = Vec::new();
        template.for_each_ref_mut(&mut |r| {
            r.slot = 0;
            seen.push((r.step.clone(), r.path.clone()));
        });
        let mut want_refs: Vec<(String, Vec<String>)> =
            paths.iter().map(|p| (step.clone(), p.clone())).collect();
        want_refs.extend(want_refs.clone());
        prop_assert_eq!(&seen, &want_refs);

        // The string splits losslessly into text and references.
        let pieces = reference::split_pieces(&text).unwrap();
        let rejoined: String = pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Ref(r) => r.to_string(),
            })
            .collect();
        prop_assert_eq!(&rejoined, &text);

        // Rendering.
        let rendered = template.render(&|slot| (slot == 0).then_some(&output));
        if wants.iter().any(Result::is_err) {
            prop_assert!(rendered.is_err(), "a path into text, a number or a boolean must fail");
        } else {
            let rendered = rendered.unwrap();
            let want_whole: Vec<Value> =
                wants.iter().map(|w| w.clone().unwrap().unwrap_or(Value::Null)).collect();
            prop_assert_eq!(&rendered["whole"], &json!(want_whole));
            let mut want_text = pre.clone();
            for (k, w) in wants.iter().enumerate() {
                want_text.push_str(&as_text(w.as_ref().unwrap().as_ref()));
                want_text.push_str(&seps[k]);
            }
            prop_assert_eq!(&rendered["text"], &json!(want_text));
        }

        // The same through a plan: a step returning `output`, and a step that captures its arguments.
        let captured = Arc::new(Mutex::new(Vec::new()));
        let mut tools = ToolRegistry::new();
        tools.register(constant(output.clone())).unwrap();
        tools.register(capture(Arc::clone(&captured))).unwrap();
        let engine = Engine::new(Arc::new(tools));
        let plan = engine
            .compile_value(json!({"steps": [
                {"id": "t", "tool": "capture", "arguments": args},
                {"id": step, "tool": "const"},
            ]}))
            .unwrap();
        let rt = paused_runtime();
        let run = rt.block_on(engine.run(&plan, RunControl::default()));
        let t = run.step("t").unwrap();
        if wants.iter().any(Result::is_err) {
            prop_assert_eq!(t.status, StepStatus::Failed);
            let err = t.error.as_deref().unwrap_or("");
            let named = format!("step '{step}'");
            prop_assert!(err.contains(&named), "{}", err);
        } else {
            prop_assert_eq!(t.status, StepStatus::Ok, "{:?}", t.error);
            let got = captured.lock().unwrap().pop().unwrap();
            let rendered = template.render(&|slot| (slot == 0).then_some(&output)).unwrap();
            prop_assert_eq!(got, rendered);
        }
    }

    /// Any string splits into text and references that join back into the same string; text pieces
    /// are never empty nor adjacent; a string without a reference stays literal.
    #[test]
    fn split_pieces_is_lossless(s in prop_oneof![string_with_refs(), ".{0,30}"]) {
        match reference::split_pieces(&s) {
            Some(pieces) => {
                prop_assert!(!pieces.is_empty());
                let mut rejoined = String::new();
                let mut last_text = false;
                for p in &pieces {
                    match p {
                        Piece::Text(t) => {
                            prop_assert!(!t.is_empty() && !last_text);
                            rejoined.push_str(t);
                            last_text = true;
                        }
                        Piece::Ref(r) => {
                            prop_assert!(reference::is_valid_id(&r.step));
                            prop_assert!(r.path.iter().all(|p| reference::is_valid_id(p)));
                            rejoined.push_str(&r.to_string());
                            last_text = false;
                        }
                    }
                }
                prop_assert_eq!(&rejoined, &s);
            }
            None => {
                // No `$ref:` is followed by an id character.
                let bytes = s.as_bytes();
                for (at, _) in s.match_indices("$ref:") {
                    let next = bytes.get(at + 5).copied();
                    prop_assert!(!next.is_some_and(reference::is_id_char), "{:?}", s);
                }
                prop_assert!(Template::compile(json!(s)).is_literal());
            }
        }
    }
}
