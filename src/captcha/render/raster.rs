//! The anti-aliased polygon filler the captcha's shapes are drawn with, by signed-area
//! accumulation: every edge adds, to each cell it crosses, the signed share of that row's
//! coverage it starts there; a running sum along the row then gives each pixel's coverage. The
//! edge arithmetic is ab_glyph_rasterizer's `draw_line` (Apache-2.0, after font-rs).
//!
//! Kept rather than calling `ab_glyph_rasterizer::Rasterizer` itself because of the numbers
//! (`cargo bench --bench captcha --features bench-captcha-rs`, docs/captcha.md): the crate's
//! rasteriser is sized per shape, cleared whole for each, and visits every cell of the shape's
//! box through a callback; this one spans the picture, is reused for every shape, sums and
//! clears only the cells a shape touched, and clips to the picture itself. With the crate a
//! render costs 7–8 % more CPU (49.6 against 46.1 µs), which is the difference between 1.94x
//! and 2.08x captcha-rs's speed, on the wrong side of the 2x the service promises.

use std::ops::Range;

use ab_glyph::Point;

use super::paint::Coverage;
use super::shape::{Fill, Shape};
/// Coverage cells the size of the picture (plus two columns), reused for every shape.
pub(super) struct Raster {
    width: usize,
    height: usize,
    /// `width + 2` cells per row: an edge at x = width still writes its right neighbour.
    cells: Vec<f32>,
    /// Rows and columns of the cells touched since the last fill (empty when none).
    rows: Range<usize>,
    columns: Range<usize>,
}

impl Raster {
    pub fn new(width: usize, height: usize) -> Self {
        Self {
            width,
            height,
            cells: vec![0.0; (width + 2) * height],
            rows: 0..0,
            columns: 0..0,
        }
    }

    /// Adds the edge from `a` to `b`, in pixels. Winding is up to the caller: a shape's edges
    /// must close, and edges going down add coverage where edges going up remove it. Parts left of
    /// the canvas count at its left edge; parts above, below or right of it are dropped.
    fn line(&mut self, a: Point, b: Point) {
        let (sign, top, bottom) = if a.y < b.y { (1.0, a, b) } else { (-1.0, b, a) };
        let (y_start, y_end) = (top.y.max(0.0), bottom.y.min(self.height as f32));
        if y_start >= y_end {
            return;
        }
        let dxdy = (bottom.x - top.x) / (bottom.y - top.y);
        let width = self.width as f32;
        let stride = self.width + 2;
        let (first_row, end_row) = (floor_index(y_start), ceil_index(y_end));
        let mut x = top.x + (y_start - top.y) * dxdy;
        for y in first_row..end_row {
            let dy = ((y + 1) as f32).min(y_end) - (y as f32).max(y_start);
            let x_next = x + dxdy * dy;
            let area = dy * sign;
            let (x0, x1) = (
                x.min(x_next).clamp(0.0, width),
                x.max(x_next).clamp(0.0, width),
            );
            let row = &mut self.cells[y * stride..(y + 1) * stride];
            let (i0, i1) = (floor_index(x0), ceil_index(x1));
            if i1 <= i0 + 1 {
                // Within one pixel: its share is set by where the edge crosses on average.
                let right = (x0 + x1) / 2.0 - i0 as f32;
                row[i0] += area * (1.0 - right);
                row[i0 + 1] += area * right;
            } else {
                // Across pixels: `share(i)` of the row lies right of the edge up to pixel i; a
                // triangle in the first and last pixel, equal slices in between.
                let per_pixel = (x1 - x0).recip();
                let into_first = x0 - i0 as f32;
                let first = 0.5 * per_pixel * (1.0 - into_first) * (1.0 - into_first);
                let into_last = x1 - (i1 - 1) as f32;
                let last = 0.5 * per_pixel * into_last * into_last;
                row[i0] += area * first;
                if i1 == i0 + 2 {
                    row[i0 + 1] += area * (1.0 - first - last);
                } else {
                    let second = per_pixel * (1.5 - into_first);
                    row[i0 + 1] += area * (second - first);
                    for cell in &mut row[i0 + 2..i1 - 1] {
                        *cell += area * per_pixel;
                    }
                    let before_last = second + (i1 - i0 - 3) as f32 * per_pixel;
                    row[i1 - 1] += area * (1.0 - before_last - last);
                }
                row[i1] += area * last;
            }
            x = x_next;
        }
        // Cells written lie between the floor of the leftmost x and one past the ceiling of the
        // rightmost.
        let left = floor_index(top.x.min(bottom.x).clamp(0.0, width));
        let right = (ceil_index(top.x.max(bottom.x).clamp(0.0, width)) + 2).min(stride);
        if self.rows.is_empty() {
            (self.rows, self.columns) = (first_row..end_row, left..right);
        } else {
            self.rows = self.rows.start.min(first_row)..self.rows.end.max(end_row);
            self.columns = self.columns.start.min(left)..self.columns.end.max(right);
        }
    }

    /// Turns the edges added since the last fill into coverage, lays it onto the canvas, and
    /// clears the cells for the next shape.
    fn fill(&mut self, canvas: &mut Coverage) {
        let (rows, columns) = (
            std::mem::replace(&mut self.rows, 0..0),
            std::mem::replace(&mut self.columns, 0..0),
        );
        let stride = self.width + 2;
        let visible = columns.start.min(self.width)..columns.end.min(self.width);
        for y in rows {
            let cells = &mut self.cells[y * stride..(y + 1) * stride];
            let mut cover = 0.0;
            for (x, cell) in cells[visible.clone()].iter().enumerate() {
                cover += cell;
                canvas.lay(visible.start + x, y, cover.abs());
            }
            cells[columns.clone()].fill(0.0);
        }
    }
}

/// `ceil(v) as usize` for non-negative `v` below 2^32, without a libm call on baseline x86-64
/// (going through `u32` is also a shorter conversion than straight to `usize`).
fn ceil_index(v: f32) -> usize {
    let floor = v as u32;
    (floor + u32::from(v > floor as f32)) as usize
}

/// `floor(v) as usize` for non-negative `v` below 2^32.
fn floor_index(v: f32) -> usize {
    v as u32 as usize
}

impl Fill for Raster {
    fn fill(&mut self, shape: &Shape, coverage: &mut Coverage) {
        for &(a, b) in shape.edges() {
            self.line(a, b);
        }
        Raster::fill(self, coverage);
    }
}
