//! From the model's image coordinates back to the page's CSS pixels.
//!
//! The model never sees the screenshot as taken: its image processor
//! resizes it with [`smart_resize`] (Qwen2-VL's rule, which UI-TARS-1.5
//! uses) to sides that are multiples of 28 within a pixel budget, and
//! UI-TARS-1.5 answers in pixels of that resized image. UI-TARS 1.0 answered
//! in thousandths of the image's sides instead ([`CoordinateMode`]).

/// Why a size cannot be resized or a point cannot be mapped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MapError {
    /// The point is not inside the image the model saw (never clamped: a
    /// model pointing off-screen is a wrong answer, not a near miss).
    #[error("point ({x}, {y}) is outside the model's image ({width} × {height})")]
    OutsideViewport {
        /// The point's horizontal position.
        x: f64,
        /// The point's vertical position.
        y: f64,
        /// The coordinate space's width.
        width: f64,
        /// The coordinate space's height.
        height: f64,
    },
    /// A size or scale the rule cannot work with.
    #[error("bad image size: {0}")]
    BadImageSize(&'static str),
}

impl MapError {
    /// A stable machine-readable code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::OutsideViewport { .. } => "outside_viewport",
            Self::BadImageSize(_) => "bad_image_size",
        }
    }
}

/// The largest ratio of the long side to the short one the rule accepts.
pub const MAX_RATIO: f64 = 200.0;

/// The parameters of Qwen2-VL's resize rule. [`Default`] is UI-TARS-1.5's:
/// factor 28, at least 100 and at most 16384 patches of 28 × 28.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResizeRule {
    /// Both sides become multiples of this (the patch size × merge size).
    pub factor: u32,
    /// The fewest pixels the resized image may have.
    pub min_pixels: u64,
    /// The most pixels the resized image may have.
    pub max_pixels: u64,
}

impl Default for ResizeRule {
    fn default() -> Self {
        Self {
            factor: 28,
            min_pixels: 100 * 28 * 28,
            max_pixels: 16384 * 28 * 28,
        }
    }
}

impl ResizeRule {
    /// The size `(height, width)` an image of `height` × `width` pixels is
    /// resized to: each side rounded to the nearest multiple of `factor`
    /// (ties to even, as Python's `round`), then, if the area is outside
    /// `min_pixels..=max_pixels`, both sides scaled by the same factor and
    /// rounded down (too big) or up (too small) to multiples of `factor`.
    /// The arithmetic is the reference's, in `f64`, step for step.
    pub fn resize(&self, height: u32, width: u32) -> Result<(u32, u32), MapError> {
        if height == 0 || width == 0 {
            return Err(MapError::BadImageSize("a side is zero"));
        }
        if self.factor == 0 || self.max_pixels == 0 {
            return Err(MapError::BadImageSize("the factor or pixel limit is zero"));
        }
        let (h, w, factor) = (f64::from(height), f64::from(width), f64::from(self.factor));
        if h.max(w) / h.min(w) > MAX_RATIO {
            return Err(MapError::BadImageSize(
                "the long side is more than 200 times the short one",
            ));
        }
        let mut h_bar = factor.max((h / factor).round_ties_even() * factor);
        let mut w_bar = factor.max((w / factor).round_ties_even() * factor);
        // Products of two u32 sides are exact in f64 up to 2^53.
        let (area, min, max) = (h * w, self.min_pixels as f64, self.max_pixels as f64);
        if h_bar * w_bar > max {
            let beta = (area / max).sqrt();
            h_bar = (h / beta / factor).floor() * factor;
            w_bar = (w / beta / factor).floor() * factor;
        } else if h_bar * w_bar < min {
            let beta = (min / area).sqrt();
            h_bar = (h * beta / factor).ceil() * factor;
            w_bar = (w * beta / factor).ceil() * factor;
        }
        let side = |v: f64| {
            if (1.0..=f64::from(u32::MAX)).contains(&v) {
                Ok(v as u32)
            } else {
                Err(MapError::BadImageSize(
                    "the resized side would be empty or huge",
                ))
            }
        };
        Ok((side(h_bar)?, side(w_bar)?))
    }
}

/// [`ResizeRule::resize`] with UI-TARS-1.5's defaults: `(height, width)`.
pub fn smart_resize(height: u32, width: u32) -> Result<(u32, u32), MapError> {
    ResizeRule::default().resize(height, width)
}

/// How the model writes coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CoordinateMode {
    /// UI-TARS-1.5 (Qwen2.5-VL): pixels of the resized image.
    #[default]
    Absolute,
    /// UI-TARS 1.0 (Qwen2-VL): thousandths of the image's width and height.
    Relative1000,
}

/// The geometry of one screenshot: what the model saw and what the page is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImageSpace {
    model_width: u32,
    model_height: u32,
    viewport_width: f64,
    viewport_height: f64,
    mode: CoordinateMode,
}

impl ImageSpace {
    /// The space of a screenshot of `width` × `height` device pixels taken
    /// at `device_scale_factor` (so covering a CSS viewport of
    /// `width / dsf` × `height / dsf`), resized by UI-TARS-1.5's rule.
    pub fn new(
        width: u32,
        height: u32,
        device_scale_factor: f64,
        mode: CoordinateMode,
    ) -> Result<Self, MapError> {
        Self::with_rule(
            width,
            height,
            device_scale_factor,
            mode,
            ResizeRule::default(),
        )
    }

    /// Like [`ImageSpace::new`], with another resize rule (a model served
    /// with other `min_pixels` / `max_pixels`).
    pub fn with_rule(
        width: u32,
        height: u32,
        device_scale_factor: f64,
        mode: CoordinateMode,
        rule: ResizeRule,
    ) -> Result<Self, MapError> {
        if !(device_scale_factor.is_finite() && device_scale_factor > 0.0) {
            return Err(MapError::BadImageSize(
                "the device scale factor is not a positive number",
            ));
        }
        let (model_height, model_width) = rule.resize(height, width)?;
        Ok(Self {
            model_width,
            model_height,
            viewport_width: f64::from(width) / device_scale_factor,
            viewport_height: f64::from(height) / device_scale_factor,
            mode,
        })
    }

    /// The resized image's `(width, height)`, in pixels.
    pub fn model_size(&self) -> (u32, u32) {
        (self.model_width, self.model_height)
    }

    /// The CSS viewport's `(width, height)` the screenshot covers.
    pub fn viewport(&self) -> (f64, f64) {
        (self.viewport_width, self.viewport_height)
    }

    /// How the model writes coordinates.
    pub fn mode(&self) -> CoordinateMode {
        self.mode
    }

    /// The extent of the model's coordinates: `(width, height)`.
    fn extent(&self) -> (f64, f64) {
        match self.mode {
            CoordinateMode::Absolute => (f64::from(self.model_width), f64::from(self.model_height)),
            CoordinateMode::Relative1000 => (1000.0, 1000.0),
        }
    }

    /// Maps a point the model wrote to the page's CSS pixels. The point must
    /// lie in `[0, width) × [0, height)` of the model's coordinates.
    pub fn to_page(&self, x: f64, y: f64) -> Result<(f64, f64), MapError> {
        let (width, height) = self.extent();
        if !(inside(x, width) && inside(y, height)) {
            return Err(MapError::OutsideViewport {
                x,
                y,
                width,
                height,
            });
        }
        Ok((
            x * self.viewport_width / width,
            y * self.viewport_height / height,
        ))
    }

    /// Maps a page point (CSS pixels) to the model's coordinates, the
    /// inverse of [`ImageSpace::to_page`] (to describe history to the model
    /// or to test).
    pub fn to_model(&self, x: f64, y: f64) -> Result<(f64, f64), MapError> {
        let (width, height) = self.extent();
        if !(inside(x, self.viewport_width) && inside(y, self.viewport_height)) {
            return Err(MapError::OutsideViewport {
                x,
                y,
                width: self.viewport_width,
                height: self.viewport_height,
            });
        }
        Ok((
            x * width / self.viewport_width,
            y * height / self.viewport_height,
        ))
    }
}

/// `0 <= v < limit` (false for NaN).
fn inside(v: f64, limit: f64) -> bool {
    (0.0..limit).contains(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_resize_matches_the_published_rule() {
        let cases = [
            // 720/28 = 25.71 → 26 → 728; 1280/28 = 45.71 → 46 → 1288;
            // 728 × 1288 = 937,664 is within [78,400, 12,845,056].
            ((720, 1280), (728, 1288)),
            // Device scale 2: 1440/28 = 51.43 → 51 → 1428; 2560/28 = 91.43 → 91 → 2548.
            ((1440, 2560), (1428, 2548)),
            // A phone, 390 × 844 CSS at scale 1: 844/28 = 30.14 → 30 → 840;
            // 390/28 = 13.93 → 14 → 392.
            ((844, 390), (840, 392)),
            // The same at scale 3 (1170 × 2532): 2532/28 = 90.43 → 90 → 2520;
            // 1170/28 = 41.79 → 42 → 1176.
            ((2532, 1170), (2520, 1176)),
            // 1920 × 1080 (the README's example): 1080/28 = 38.57 → 39 → 1092;
            // 1920/28 = 68.57 → 69 → 1932.
            ((1080, 1920), (1092, 1932)),
            // A tie: 406/28 = 14.5 rounds to even, 14 → 392 (not 15 → 420).
            ((406, 700), (392, 700)),
            // Too big: 6000 × 8000 → 5992 × 8008 = 47,983,936 > max;
            // beta = sqrt(48,000,000 / 12,845,056) = 1.93309…;
            // 6000/beta/28 = 110.85 → 110 → 3080; 8000/beta/28 = 147.80 → 147 → 4116.
            ((6000, 8000), (3080, 4116)),
            // Too small: 50 × 100 → 56 × 112 = 6,272 < min;
            // beta = sqrt(78,400 / 5,000) = 3.95980…;
            // 50·beta/28 = 7.07 → 8 → 224; 100·beta/28 = 14.14 → 15 → 420.
            ((50, 100), (224, 420)),
        ];
        for ((h, w), expected) in cases {
            assert_eq!(smart_resize(h, w), Ok(expected), "{h} × {w}");
        }
    }

    #[test]
    fn smart_resize_refuses_what_the_rule_refuses() {
        for (h, w) in [(0, 100), (100, 0), (1, 201), (30_000, 100)] {
            assert_eq!(
                smart_resize(h, w).map_err(|e| e.code()),
                Err("bad_image_size")
            );
        }
        let zero = ResizeRule {
            factor: 0,
            ..ResizeRule::default()
        };
        assert!(zero.resize(100, 100).is_err());
    }

    #[test]
    fn model_points_map_back_to_the_page_within_a_pixel() {
        for (width, height, dsf) in [
            (1280, 720, 1.0),
            (2560, 1440, 2.0),
            (390, 844, 1.0),
            (1170, 2532, 3.0),
        ] {
            let space = ImageSpace::new(width, height, dsf, CoordinateMode::Absolute).unwrap();
            let (vw, vh) = space.viewport();
            let mut page_y = 0.0;
            while page_y < vh {
                let mut page_x = 0.0;
                while page_x < vw {
                    let (mx, my) = space.to_model(page_x, page_y).unwrap();
                    // The model writes integers.
                    let (mx, my) = (mx.round(), my.round());
                    let (model_w, model_h) = space.model_size();
                    let (mx, my) = (
                        mx.min(f64::from(model_w) - 1.0),
                        my.min(f64::from(model_h) - 1.0),
                    );
                    let (x, y) = space.to_page(mx, my).unwrap();
                    assert!(
                        (x - page_x).abs() <= 1.0,
                        "{width}×{height}@{dsf}: x {page_x} → {x}"
                    );
                    assert!(
                        (y - page_y).abs() <= 1.0,
                        "{width}×{height}@{dsf}: y {page_y} → {y}"
                    );
                    page_x += 7.0;
                }
                page_y += 5.0;
            }
        }
    }

    #[test]
    fn the_model_image_corners_map_to_the_viewport_corners() {
        let space = ImageSpace::new(2560, 1440, 2.0, CoordinateMode::Absolute).unwrap();
        assert_eq!(space.model_size(), (2548, 1428));
        assert_eq!(space.viewport(), (1280.0, 720.0));
        assert_eq!(space.to_page(0.0, 0.0), Ok((0.0, 0.0)));
        assert_eq!(space.to_page(1274.0, 714.0), Ok((640.0, 360.0)));
    }

    #[test]
    fn relative_coordinates_are_thousandths_of_the_viewport() {
        let space = ImageSpace::new(1280, 720, 1.0, CoordinateMode::Relative1000).unwrap();
        assert_eq!(space.to_page(500.0, 500.0), Ok((640.0, 360.0)));
        assert_eq!(space.to_page(250.0, 100.0), Ok((320.0, 72.0)));
        assert_eq!(space.to_model(640.0, 360.0), Ok((500.0, 500.0)));
        assert_eq!(
            space.to_page(1000.0, 10.0).map_err(|e| e.code()),
            Err("outside_viewport")
        );
    }

    #[test]
    fn points_outside_the_image_are_refused_not_clamped() {
        let space = ImageSpace::new(1280, 720, 1.0, CoordinateMode::default()).unwrap();
        for (x, y) in [
            (1288.0, 10.0),
            (10.0, 728.0),
            (5000.0, 5000.0),
            (-1.0, 10.0),
            (f64::NAN, 1.0),
            (1.0, f64::INFINITY),
        ] {
            assert_eq!(
                space.to_page(x, y).map_err(|e| e.code()),
                Err("outside_viewport"),
                "({x}, {y})"
            );
        }
        assert!(space.to_page(1287.9, 727.9).is_ok());
        assert!(space.to_model(1280.0, 0.0).is_err());
    }

    #[test]
    fn a_bad_device_scale_factor_is_refused() {
        for dsf in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                ImageSpace::new(1280, 720, dsf, CoordinateMode::Absolute).map_err(|e| e.code()),
                Err("bad_image_size")
            );
        }
    }
}
