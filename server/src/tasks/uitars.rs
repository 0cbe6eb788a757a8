//! The UI-TARS action grammar, parsed exactly, and its coordinates mapped
//! back onto the page.
//!
//! A UI-TARS model (ByteDance's GUI agent, built on Qwen2-VL / Qwen2.5-VL)
//! answers each screenshot with
//!
//! ```text
//! Thought: I need to open the search box first.
//! Action: click(start_box='<|box_start|>(235,512)<|box_end|>')
//! ```
//!
//! The grammar, as the model family's published prompts (`prompt.py`, the
//! 1.0 README) and parser (`action_parser.py`) define it:
//!
//! ```text
//! click(point='<point>x1 y1</point>')        left_single(…) is the same
//! left_double(point='<point>x1 y1</point>')
//! right_single(point='<point>x1 y1</point>')
//! drag(start_point='<point>x1 y1</point>', end_point='<point>x2 y2</point>')
//! hotkey(key='ctrl c')                       space-separated, lowercase
//! type(content='xxx')                        Python escapes; a final \n = submit
//! scroll(point='<point>x1 y1</point>', direction='down or up or right or left')
//! wait()
//! finished(content='xxx')                    content optional
//! call_user()
//! ```
//!
//! Points are also written `start_box='(x1,y1)'`, with
//! `<|box_start|>…<|box_end|>` around them, or as boxes of four numbers
//! (their centre is meant). [`parse()`] reads an answer into a [`Step`] in the
//! model's image coordinates; [`ImageSpace`] maps those to CSS pixels of
//! the page; `Display` on [`Action`] writes the canonical text back.
//!
//! Mobile-only actions (`long_press`, `open_app`, `press_home`,
//! `press_back`) and others outside the computer-use prompt are
//! [`ParseError::UnknownAction`].

mod action;
mod coords;
mod error;
mod parse;
mod point;
mod scan;

pub use action::{Action, Point, ScrollDirection};
pub use coords::{CoordinateMode, ImageSpace, MAX_RATIO, MapError, ResizeRule, smart_resize};
pub use error::ParseError;
pub use parse::{MAX_ANSWER_BYTES, Step, parse};

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A coordinate as the model writes them: integers or short decimals.
    fn coordinate() -> impl Strategy<Value = f64> {
        (0u32..20_000, 0u32..1000).prop_map(|(n, k)| f64::from(n) + f64::from(k) / 1000.0)
    }

    fn point() -> impl Strategy<Value = Point> {
        (coordinate(), coordinate()).prop_map(|(x, y)| Point { x, y })
    }

    fn key() -> impl Strategy<Value = String> {
        "[a-z0-9]{1,10}"
    }

    fn direction() -> impl Strategy<Value = ScrollDirection> {
        prop_oneof![
            Just(ScrollDirection::Up),
            Just(ScrollDirection::Down),
            Just(ScrollDirection::Left),
            Just(ScrollDirection::Right),
        ]
    }

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            point().prop_map(|p| Action::Click { x: p.x, y: p.y }),
            point().prop_map(|p| Action::DoubleClick { x: p.x, y: p.y }),
            point().prop_map(|p| Action::RightClick { x: p.x, y: p.y }),
            (point(), point()).prop_map(|(from, to)| Action::Drag { from, to }),
            proptest::collection::vec(key(), 1..4).prop_map(|keys| Action::Hotkey { keys }),
            (any::<String>(), any::<bool>()).prop_map(|(mut content, submit)| {
                // A text ending in a newline without a submit has no text
                // form: its newline *is* the submit.
                if !submit && content.ends_with('\n') {
                    content.push('.');
                }
                Action::Type { content, submit }
            }),
            (point(), direction()).prop_map(|(p, direction)| Action::Scroll {
                x: p.x,
                y: p.y,
                direction
            }),
            Just(Action::Wait),
            any::<String>().prop_map(|content| Action::Finished { content }),
            Just(Action::CallUser),
        ]
    }

    proptest! {
        #[test]
        fn parse_never_panics_on_arbitrary_text(answer in any::<String>()) {
            let _ = parse(&answer);
            let _ = parse(&format!("Action: {answer}"));
        }

        #[test]
        fn parse_never_panics_on_text_spliced_into_an_action(
            action in action(),
            junk in any::<String>(),
            at in any::<prop::sample::Index>(),
        ) {
            let text = format!("Thought: t\nAction: {action}");
            let boundaries: Vec<usize> = text
                .char_indices()
                .map(|(i, _)| i)
                .chain(std::iter::once(text.len()))
                .collect();
            let cut = boundaries[at.index(boundaries.len())];
            let spliced = format!("{}{junk}{}", &text[..cut], &text[cut..]);
            let _ = parse(&spliced);
            let truncated = &text[..cut];
            let _ = parse(truncated);
        }

        #[test]
        fn an_action_written_out_parses_back_to_itself(
            action in action(),
            thought in "[A-Za-z ,.]{0,40}",
        ) {
            let step = parse(&format!("Thought: {thought}\nAction: {action}"))
                .map_err(|e| TestCaseError::fail(format!("{action}: {e}")))?;
            prop_assert_eq!(&step.action, &action);
            let thought = thought.trim();
            prop_assert_eq!(step.thought.as_deref(), (!thought.is_empty()).then_some(thought));
        }

        #[test]
        fn parsed_points_are_finite_and_never_negative(answer in any::<String>()) {
            for text in [answer.clone(), format!("Action: click(start_box='({answer})')")] {
                if let Ok(Step { action: Action::Click { x, y }, .. }) = parse(&text) {
                    prop_assert!(x.is_finite() && y.is_finite() && x >= 0.0 && y >= 0.0);
                }
            }
        }
    }
}
