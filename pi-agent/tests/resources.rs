//! Skills and prompt templates: discovery (bad files skipped with a clear error, the rest
//! load), expansion after `input` and before `before_agent_start`, and their spans.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Log, log_on};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pi_agent::events::AgentEvent;
use pi_agent::extensions::{extension, hooks};
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse};
use pi_agent::resources::Resources;
use pi_agent::tools::ToolRegistry;
use pi_agent::{Agent, AgentConfig};
use pi_observe_core::testing::{CaptureSubscriber, assert_paired, span_named};
use pi_observe_core::{Attribution, Observability, Value, names};
use tokio_util::sync::CancellationToken;

fn scratch(name: &str) -> PathBuf {
    common::scratch("resources", name)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A skills directory with two good skills and three broken ones, and a templates directory.
fn fixture(dir: &Path) -> (PathBuf, PathBuf) {
    let skills = dir.join("skills");
    write(
        &skills.join("deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Deploys the service. Use when asked to ship.\n---\n# Deploy\nRun ./ship.sh in the repo root.\n",
    );
    write(&skills.join("quick-fix.md"), "---\nname: quick-fix\ndescription: Small fixes.\n---\nFix it quickly.\n");
    write(&skills.join("broken/SKILL.md"), "---\nname: broken\ndescription: never closed\n");
    write(&skills.join("Bad_Name/SKILL.md"), "---\nname: Bad_Name\ndescription: d\n---\nbody\n");
    write(&skills.join("nodesc/SKILL.md"), "---\nname: nodesc\n---\nbody\n");
    let templates = dir.join("prompts");
    write(&templates.join("review.md"), "---\ndescription: Review staged changes\n---\nReview the staged changes.\n");
    write(&templates.join("component.md"), "Create a component named $1 with: ${@:2}. All: $ARGUMENTS\n");
    write(&templates.join("nested/ignored.md"), "not discovered: templates are not recursive\n");
    (skills, templates)
}

#[test]
fn discovery_loads_good_files_and_names_each_bad_one() {
    let dir = scratch("discovery");
    let (skills, templates) = fixture(&dir);
    let resources = Resources::load(std::slice::from_ref(&skills), &[templates]);
    let names: Vec<&str> = resources.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["deploy", "quick-fix"]);
    assert_eq!(resources.skill("deploy").unwrap().description, "Deploys the service. Use when asked to ship.");
    let templates: Vec<(&str, &str)> =
        resources.templates.iter().map(|t| (t.name.as_str(), t.description.as_str())).collect();
    assert_eq!(
        templates,
        [
            ("component", "Create a component named $1 with: ${@:2}. All: $ARGUMENTS"),
            ("review", "Review staged changes")
        ]
    );
    let errors: Vec<String> = resources.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    let error_for =
        |file: &str| errors.iter().find(|e| e.contains(file)).unwrap_or_else(|| panic!("{file}: {errors:?}"));
    assert!(error_for("Bad_Name/SKILL.md").contains("skill name \"Bad_Name\" is invalid"));
    assert!(error_for("broken/SKILL.md").contains("frontmatter is not closed"));
    assert!(error_for("nodesc/SKILL.md").contains("no description"));
    // A second directory with a colliding name: the first one is kept, the collision reported.
    let other = dir.join("more-skills");
    write(&other.join("deploy/SKILL.md"), "---\nname: deploy\ndescription: another deploy\n---\nx\n");
    let both = Resources::load(&[skills, other], &[]);
    assert_eq!(both.skill("deploy").unwrap().description, "Deploys the service. Use when asked to ship.");
    assert!(both.errors.iter().any(|e| e.message.contains("already taken")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn commands_expand_after_input_and_before_agent_start_and_are_traced() {
    let dir = scratch("expand");
    let (skills, templates) = fixture(&dir);
    let seen = Log::default();
    let watched = seen.clone();
    let watcher = extension("watcher", move |api| {
        log_on(api, hooks::Input, &watched, |event| format!("input: {}", event.text));
        log_on(api, hooks::BeforeAgentStart, &watched, |event| {
            let skills_listed = event.system_prompt.clone().unwrap_or_default().contains("<name>deploy</name>");
            format!("before_agent_start: {} (skills listed: {skills_listed})", event.prompt)
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("shipping"), FauxResponse::text("component made")]);
    let model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let mut agent =
        Agent::new(faux.clone(), model, ToolRegistry::all_builtin(), None, AgentConfig::default(), dir.clone());
    agent.set_resources(Resources::load(&[skills], &[templates]));
    agent.add_extension(&watcher);

    let hub = Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let user = Attribution::new().with(names::CTX_USER_ID, "u7").with(names::CTX_ORG_ID, "acme");
    runtime.block_on(hub.run_with_context(user, async {
        let cancel = CancellationToken::new();
        let mut sink = |_: AgentEvent| {};
        agent.prompt("/skill:deploy to prod", &cancel, &mut sink).await.unwrap();
        agent.prompt(r#"/component Button "click handler" disabled"#, &cancel, &mut sink).await.unwrap();
    }));

    let seen = seen.lines();
    assert_eq!(seen[0], "input: /skill:deploy to prod", "input sees the raw command");
    assert!(seen[1].starts_with("before_agent_start: <skill name=\"deploy\""), "{}", seen[1]);
    assert!(seen[1].contains("Run ./ship.sh in the repo root.") && seen[1].contains("User: to prod"));
    assert!(seen[1].ends_with("(skills listed: true)"));
    assert_eq!(
        seen[3],
        "before_agent_start: Create a component named Button with: click handler disabled. All: Button click handler disabled (skills listed: true)"
    );
    let sent = faux.sent();
    assert!(sent[0].payload["messages"][0]["content"].as_str().unwrap().contains("Run ./ship.sh"));

    let events = capture.take();
    let spans = assert_paired(&events);
    let skill = span_named(&spans, names::AGENT_SKILL);
    assert_eq!(skill.attributes.get(names::SKILL_NAME), Some(&Value::from("deploy")));
    assert_eq!(skill.context.get(names::CTX_USER_ID).map(String::as_str), Some("u7"));
    let prompt = spans.iter().find(|s| s.name == names::AGENT_PROMPT).unwrap();
    assert_eq!(skill.parent_span_id, Some(prompt.span_id), "expansion happens inside the prompt");
    let template = span_named(&spans, names::AGENT_PROMPT_TEMPLATE);
    assert_eq!(template.attributes.get(names::TEMPLATE_NAME), Some(&Value::from("component")));
    assert_eq!(template.attributes.get("argumentCount"), Some(&Value::I64(3)));
    // Bodies are content: the default policy keeps them out of every record.
    for event in &events {
        assert!(!event.to_json().contains("ship.sh"), "skill body leaked: {}", event.to_json());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
