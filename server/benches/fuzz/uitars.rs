//! The UI-TARS answer parser (`tasks::uitars::parse`), then what `run_task`
//! does with a parsed step: its points mapped onto the page. An accepted
//! answer must also read back as the same action from its canonical text
//! (`Action`'s `Display` promises it).

use cordon::tasks::uitars::{self, Action, CoordinateMode, ImageSpace};

use crate::mutate::Gen;
use crate::{Outcome, Target};

pub const TARGET: Target = Target {
    name: "uitars",
    dict: &[
        "Thought:",
        "Action:",
        "Reflection:",
        "Action_Summary:",
        "click(",
        "left_double(",
        "right_single(",
        "drag(",
        "hotkey(",
        "type(",
        "scroll(",
        "wait()",
        "finished(",
        "call_user()",
        "long_press(",
        "start_box=",
        "end_box=",
        "point=",
        "start_point=",
        "direction=",
        "content=",
        "key=",
        "<|box_start|>",
        "<|box_end|>",
        "<point>",
        "</point>",
        "<bbox>",
        "</bbox>",
        "'",
        "\"",
        "(",
        ")",
        ",",
        "\\'",
        "\\n",
        "\n\n",
        "```",
        "[EOS]",
    ],
    shape,
    run,
};

fn number(g: &mut Gen) -> String {
    match g.below(10) {
        0 => g.odd_number().to_owned(),
        1..=3 => format!("{}.{}", g.below(2000), g.below(1000)),
        _ => g.below(2000).to_string(),
    }
}

fn point(g: &mut Gen, name: &str) -> String {
    let (x, y) = (number(g), number(g));
    let inner = match g.below(6) {
        0 => format!("({x},{y})"),
        1 => format!("<point>{x} {y}</point>"),
        2 => format!("<|box_start|>({x},{y})<|box_end|>"),
        3 => format!("({x},{y},{},{})", number(g), number(g)),
        4 => format!("<bbox>{x} {y} {} {}</bbox>", number(g), number(g)),
        _ => format!("[{x}, {y}]"),
    };
    format!("{name}='{inner}'")
}

fn quoted(g: &mut Gen) -> String {
    let t = g.text(40).replace('\'', "\\'");
    format!("'{t}'")
}

fn action(g: &mut Gen) -> String {
    let p = |g: &mut Gen| {
        let name = g.pick(&["start_box", "point"]);
        point(g, name)
    };
    match g.below(11) {
        0 => format!("click({})", p(g)),
        1 => format!("left_single({})", p(g)),
        2 => format!("left_double({})", p(g)),
        3 => format!("right_single({})", p(g)),
        4 => format!("drag({}, {})", point(g, "start_box"), point(g, "end_box")),
        5 => format!(
            "hotkey(key='{}')",
            g.pick(&["ctrl c", "enter", "ctrl shift t", "alt f4", "Tab"])
        ),
        6 => format!("type(content={})", quoted(g)),
        7 => format!(
            "scroll({}, direction='{}')",
            p(g),
            g.pick(&["up", "down", "left", "right", "sideways"])
        ),
        8 => "wait()".to_owned(),
        9 => format!("finished(content={})", quoted(g)),
        _ => "call_user()".to_owned(),
    }
}

fn shape(g: &mut Gen) -> Vec<u8> {
    let mut s = String::new();
    if g.chance(0.1) {
        s.push_str("```\n");
    }
    if g.chance(0.8) {
        let head = g.pick(&["Thought", "Reflection", "Action_Summary"]);
        s.push_str(&format!("{head}: {}\n", g.text(60)));
    }
    s.push_str("Action: ");
    s.push_str(&action(g));
    if g.chance(0.1) {
        s.push_str("\n\n");
        s.push_str(&action(g));
    }
    if g.chance(0.1) {
        s.push_str("[EOS]");
    }
    if s.starts_with("```") {
        s.push_str("\n```");
    }
    s.into_bytes()
}

fn points(a: &Action) -> Vec<(f64, f64)> {
    match a {
        Action::Click { x, y }
        | Action::DoubleClick { x, y }
        | Action::RightClick { x, y }
        | Action::Scroll { x, y, .. } => vec![(*x, *y)],
        Action::Drag { from, to } => vec![(from.x, from.y), (to.x, to.y)],
        _ => Vec::new(),
    }
}

fn run(input: &[u8]) -> Outcome {
    // The answer reaches the parser as a String (decoded from the model's JSON).
    let text = String::from_utf8_lossy(input);
    let step = match uitars::parse(&text) {
        Ok(step) => step,
        Err(e) => return Outcome::Refused(e.code()),
    };
    for mode in [CoordinateMode::Absolute, CoordinateMode::Relative1000] {
        let space = ImageSpace::new(1280, 720, 1.0, mode).expect("a 1280×720 space");
        for (x, y) in points(&step.action) {
            if let Ok((px, py)) = space.to_page(x, y)
                && !(px.is_finite() && py.is_finite() && px >= 0.0 && py >= 0.0)
            {
                return Outcome::Odd(format!("({x}, {y}) mapped to ({px}, {py})"));
            }
        }
    }
    let canonical = format!("Action: {}", step.action);
    match uitars::parse(&canonical) {
        Ok(again) if again.action == step.action => Outcome::Accepted,
        Ok(again) => Outcome::Odd(format!(
            "{:?} reads back as {:?}",
            step.action, again.action
        )),
        Err(e) => Outcome::Odd(format!("{canonical:?} does not read back: {e}")),
    }
}
