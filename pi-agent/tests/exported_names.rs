//! The names pi exports as safe without checking them again: a built-in tool's name and a
//! response model that repeats the catalogued model asked for. Anything else still goes through
//! the identifier check (shape, then the secret scrubber).

use std::borrow::Cow;

use pi_agent::model::Catalogued;
use pi_agent::provider::response_model_of;
use pi_agent::tools::{BUILTIN_TOOLS, exported_tool_name};

const SECRET: &str = "sk-abcdefghijklmnopqrstuvwx";

#[test]
fn built_in_tool_names_are_exported_as_pi_wrote_them() {
    for name in BUILTIN_TOOLS {
        assert_eq!(exported_tool_name(name), Cow::Borrowed(name));
        assert!(matches!(exported_tool_name(name), Cow::Borrowed(_)), "{name} is not copied");
    }
}

#[test]
fn other_tool_names_are_checked_like_any_identifier() {
    assert_eq!(exported_tool_name("deploy_preview"), "deploy_preview");
    assert_eq!(exported_tool_name("my tool"), "invalid");
    assert_eq!(exported_tool_name(SECRET), "invalid");
    assert_eq!(exported_tool_name(""), "invalid");
}

#[test]
fn a_response_repeating_the_catalogued_model_is_that_model() {
    assert_eq!(response_model_of(Catalogued::Model, "claude-sonnet-4-5", "claude-sonnet-4-5"), "claude-sonnet-4-5");
    // A models.json id is exported as the model already, whatever its shape: so is its echo.
    assert_eq!(response_model_of(Catalogued::Model, "my local model", "my local model"), "my local model");
}

#[test]
fn any_other_response_model_is_checked() {
    // A dated variant of the model asked for: identifier-shaped, no secret.
    assert_eq!(response_model_of(Catalogued::Model, "gpt-4o", "gpt-4o-2024-08-06"), "gpt-4o-2024-08-06");
    assert_eq!(response_model_of(Catalogued::Model, "gpt-4o", SECRET), "invalid");
    assert_eq!(response_model_of(Catalogued::Model, "gpt-4o", "not a model"), "invalid");
    // A model only a user typed is content: its echo is checked too.
    assert_eq!(response_model_of(Catalogued::Provider, "my model", "my model"), "invalid");
    assert_eq!(response_model_of(Catalogued::Neither, SECRET, SECRET), "invalid");
}
