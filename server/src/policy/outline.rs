//! The approval's picture: the page at request time with the target
//! element's box drawn on it, so the operator sees what would be clicked.

use anyhow::Context;

/// Outline colour (the dashboard's danger red).
const RED: image::Rgb<u8> = image::Rgb([220, 38, 38]);
/// Outline width in pixels.
const WIDTH: u32 = 3;

/// `jpeg` with a rectangle around `rect` (left, top, width, height in
/// image pixels; clipped to the image), re-encoded as JPEG.
pub fn outline(jpeg: &[u8], rect: [f64; 4]) -> anyhow::Result<Vec<u8>> {
    let mut img = image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg)
        .context("cannot decode the screenshot")?
        .to_rgb8();
    let (w, h) = img.dimensions();
    if w == 0 || h == 0 {
        return Ok(jpeg.to_vec());
    }
    let clip = |v: f64, max: u32| -> u32 {
        if v.is_finite() {
            // Clamped first, so the cast cannot truncate.
            #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let px = v.clamp(0.0, f64::from(max - 1)).round() as u32;
            px
        } else {
            0
        }
    };
    let [left, top, width, height] = rect;
    let (x0, y0) = (clip(left - 2.0, w), clip(top - 2.0, h));
    let (x1, y1) = (clip(left + width + 2.0, w), clip(top + height + 2.0, h));
    for y in y0..=y1 {
        for x in x0..=x1 {
            let edge = x < x0 + WIDTH || x + WIDTH > x1 || y < y0 + WIDTH || y + WIDTH > y1;
            if edge {
                img.put_pixel(x, y, RED);
            }
        }
    }
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 75)
        .encode_image(&img)
        .context("cannot encode the screenshot")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_box_is_drawn_in_red_and_the_rest_is_left_alone() {
        let img = image::RgbImage::from_pixel(100, 80, image::Rgb([255, 255, 255]));
        let mut jpeg = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
            .encode_image(&img)
            .unwrap();
        let out = outline(&jpeg, [20.0, 20.0, 40.0, 20.0]).unwrap();
        let got = image::load_from_memory(&out).unwrap().to_rgb8();
        let edge = got.get_pixel(19, 30);
        assert!(edge[0] > 150 && edge[1] < 120, "{edge:?}");
        let inside = got.get_pixel(40, 30);
        assert!(inside[1] > 200, "{inside:?}");
        // Off the image: clipped, not a panic.
        outline(&jpeg, [-50.0, 70.0, 500.0, 500.0]).unwrap();
    }
}
