//! Shapes as closed polygons in pixels (a warped glyph outline, a thick stroke), handed to a
//! filler (`raster`) that turns them into anti-aliased coverage.

use ab_glyph::{OutlineCurve, Point, point};

use super::paint::Coverage;

/// Longest straight piece a curve is cut into, in pixels: short enough that a warp visibly bends
/// long stems and strokes look round, long enough to keep the piece count low.
const SEGMENT: f32 = 8.0;

/// The edges of one shape, in pixels, and their bounding box. Reused from shape to shape.
pub(super) struct Shape {
    edges: Vec<(Point, Point)>,
    min: Point,
    max: Point,
}

impl Shape {
    pub fn new() -> Self {
        Self {
            edges: Vec::with_capacity(256),
            min: point(f32::MAX, f32::MAX),
            max: point(f32::MIN, f32::MIN),
        }
    }

    fn edge(&mut self, a: Point, b: Point) {
        self.edges.push((a, b));
        for p in [a, b] {
            self.min = point(self.min.x.min(p.x), self.min.y.min(p.y));
            self.max = point(self.max.x.max(p.x), self.max.y.max(p.y));
        }
    }

    /// Adds a font outline curve (font units) as straight pieces of at most about `SEGMENT`
    /// pixels (`pixels_per_unit` apart from any warp), their ends mapped through `place`.
    pub fn curve(
        &mut self,
        curve: &OutlineCurve,
        pixels_per_unit: f32,
        place: impl Fn(Point) -> Point,
    ) {
        // The control polygon is at least as long as the curve.
        let (from, length) = match *curve {
            OutlineCurve::Line(a, b) => (a, distance(a, b)),
            OutlineCurve::Quad(a, b, c) => (a, distance(a, b) + distance(b, c)),
            OutlineCurve::Cubic(a, b, c, d) => {
                (a, distance(a, b) + distance(b, c) + distance(c, d))
            }
        };
        let pieces = (length * pixels_per_unit / SEGMENT).ceil().max(1.0) as usize;
        let mut start = place(from);
        for k in 1..pieces {
            let end = place(bezier(curve, k as f32 / pieces as f32));
            self.edge(start, end);
            start = end;
        }
        // The exact end point, so that consecutive curves join without a gap.
        self.edge(start, place(curve_end(curve)));
    }

    /// Adds a stroke `width` pixels wide (butt ends) along the quadratic Bézier from `a` through
    /// control `c` to `b`: the curve offset by half the width to each side, as one polygon.
    pub fn stroke(&mut self, a: Point, c: Point, b: Point, width: f32) {
        let curve = OutlineCurve::Quad(a, c, b);
        let length = distance(a, c) + distance(c, b);
        let pieces = (length / SEGMENT).ceil().max(2.0) as usize;
        let centre: Vec<Point> = (0..=pieces)
            .map(|k| bezier(&curve, k as f32 / pieces as f32))
            .collect();
        let half = width / 2.0;
        // The normal at each point, from its neighbours (one-sided at the ends).
        let offset = |k: usize| {
            let (p, q) = (centre[k.saturating_sub(1)], centre[(k + 1).min(pieces)]);
            let (dx, dy) = (q.x - p.x, q.y - p.y);
            let scale = half / (dx * dx + dy * dy).sqrt().max(f32::EPSILON);
            point(-dy * scale, dx * scale)
        };
        let left: Vec<Point> = (0..=pieces).map(|k| centre[k] + offset(k)).collect();
        let right: Vec<Point> = (0..=pieces).rev().map(|k| centre[k] - offset(k)).collect();
        let ring: Vec<Point> = left.into_iter().chain(right).collect();
        for (k, &p) in ring.iter().enumerate() {
            self.edge(p, ring[(k + 1) % ring.len()]);
        }
    }

    /// Fills the shape onto `coverage` with `raster`, and empties it for the next one. Only the
    /// shape's bounding box is rasterised; pixels of it outside the picture are dropped.
    pub fn edges(&self) -> &[(Point, Point)] {
        &self.edges
    }

    /// Fills the shape onto `coverage` with `filler`, and empties it for the next one.
    pub fn fill(&mut self, filler: &mut impl Fill, coverage: &mut Coverage) {
        if !self.edges.is_empty() {
            filler.fill(self, coverage);
        }
        self.edges.clear();
        (self.min, self.max) = (point(f32::MAX, f32::MAX), point(f32::MIN, f32::MIN));
    }
}

/// Something that turns a closed shape into coverage (nonzero winding), dropping what falls
/// outside the picture.
pub(super) trait Fill {
    fn fill(&mut self, shape: &Shape, coverage: &mut Coverage);
}

/// `ab_glyph_rasterizer`, the rasteriser ab_glyph uses, kept only to compare with the own one in
/// the captcha bench. Only the shape's bounding box is rasterised.
#[cfg(feature = "bench-captcha-rs")]
impl Fill for ab_glyph_rasterizer::Rasterizer {
    fn fill(&mut self, shape: &Shape, coverage: &mut Coverage) {
        // One pixel of room on the left and top, two on the right (an edge's coverage spills
        // into the next cell) and one below: every edge lies strictly inside the rasteriser,
        // which it must, since it drops pieces outside its own box.
        let (left, top) = ((shape.min.x - 1.0).floor(), (shape.min.y - 1.0).floor());
        let box_width = (shape.max.x.ceil() - left) as usize + 2;
        let box_height = (shape.max.y.ceil() - top) as usize + 1;
        self.reset(box_width, box_height);
        let origin = point(left, top);
        for &(a, b) in &shape.edges {
            self.draw_line(a - origin, b - origin);
        }
        let (left, top) = (left as isize, top as isize);
        let (width, height) = (coverage.width as isize, coverage.height() as isize);
        // Pixels come row by row; counting columns here avoids a division per pixel.
        let (mut x, mut y) = (0, 0);
        self.for_each_pixel(|_, cover| {
            let (px, py) = (left + x, top + y);
            if cover > 0.0 && (0..width).contains(&px) && (0..height).contains(&py) {
                coverage.lay(px as usize, py as usize, cover);
            }
            x += 1;
            if x == box_width as isize {
                (x, y) = (0, y + 1);
            }
        });
    }
}

fn distance(a: Point, b: Point) -> f32 {
    ((b.x - a.x) * (b.x - a.x) + (b.y - a.y) * (b.y - a.y)).sqrt()
}

fn curve_end(curve: &OutlineCurve) -> Point {
    match *curve {
        OutlineCurve::Line(_, end)
        | OutlineCurve::Quad(_, _, end)
        | OutlineCurve::Cubic(_, _, _, end) => end,
    }
}

/// The point at parameter `t` (0..=1) along a line or Bézier curve (de Casteljau).
fn bezier(curve: &OutlineCurve, t: f32) -> Point {
    let lerp = |a: Point, b: Point| point(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t);
    match *curve {
        OutlineCurve::Line(a, b) => lerp(a, b),
        OutlineCurve::Quad(a, b, c) => lerp(lerp(a, b), lerp(b, c)),
        OutlineCurve::Cubic(a, b, c, d) => {
            let (ab, bc, cd) = (lerp(a, b), lerp(b, c), lerp(c, d));
            lerp(lerp(ab, bc), lerp(bc, cd))
        }
    }
}
