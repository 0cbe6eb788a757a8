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
//! (their centre is meant). [`parse`] reads an answer into a [`Step`] in the
//! model's image coordinates; [`ImageSpace`] maps those to CSS pixels of
//! the page; `Display` on [`Action`] writes the canonical text back.
//!
//! Mobile-only actions (`long_press`, `open_app`, `press_home`,
//! `press_back`) and others outside the computer-use prompt are
//! [`ParseError::UnknownAction`].

mod action;
mod coords;
mod parse;

pub use action::{Action, Point, ScrollDirection};
pub use coords::{CoordinateMode, ImageSpace, MAX_RATIO, MapError, ResizeRule, smart_resize};
pub use parse::{MAX_ANSWER_BYTES, ParseError, Step, parse};
