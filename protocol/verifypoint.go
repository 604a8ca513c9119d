package protocol

import (
	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// extPoint is a point of edwards25519 in extended coordinates (X:Y:Z:T),
// with x = X/Z, y = Y/Z and x·y = T/Z, as edwards25519.Point holds one.
// keyTable.verify sums up to 96 points per check in it: edwards25519's own
// Point.Add checks on every call that both points were initialised and
// turns its second operand into a cached form first, which came to a
// third of the additions' cost.
type extPoint struct{ X, Y, Z, T field.Element }

// affinePoint is a point with Z = 1, held as a mixed addition takes it:
// y+x, y−x and 2d·x·y (edwards25519's affineCached).
type affinePoint struct{ YplusX, YminusX, T2d field.Element }

// setIdentity sets p to the neutral point (0, 1).
func (p *extPoint) setIdentity() {
	p.X.Zero()
	p.Y.One()
	p.Z.One()
	p.T.Zero()
}

// addAffine sets p to p + q: the unified addition of twisted Edwards
// curves with a = −1 in extended coordinates (Hisil, Wong, Carter and
// Dawson, 2008, §3.1, with Z2 = 1), the formula edwards25519's
// Point.Add and AddAffine use, complete on this curve (it also doubles
// and adds the neutral point and points of small order). Seven
// multiplications.
func (p *extPoint) addAffine(q *affinePoint) {
	var a, b, pp, mm, tt, z2, c, d field.Element
	a.Add(&p.Y, &p.X)
	b.Subtract(&p.Y, &p.X)
	pp.Multiply(&a, &q.YplusX)
	mm.Multiply(&b, &q.YminusX)
	tt.Multiply(&p.T, &q.T2d)
	z2.Add(&p.Z, &p.Z)
	// The completed point ((a:c), (b:d)) …
	a.Subtract(&pp, &mm)
	b.Add(&pp, &mm)
	c.Add(&z2, &tt)
	d.Subtract(&z2, &tt)
	// … back in extended coordinates.
	p.X.Multiply(&a, &d)
	p.Y.Multiply(&b, &c)
	p.Z.Multiply(&c, &d)
	p.T.Multiply(&a, &b)
}

// subAffine sets p to p − q: addAffine of −q = (−x, y), whose y+x and
// y−x are q's swapped and 2d·x·y negated.
func (p *extPoint) subAffine(q *affinePoint) {
	var a, b, pp, mm, tt, z2, c, d field.Element
	a.Add(&p.Y, &p.X)
	b.Subtract(&p.Y, &p.X)
	pp.Multiply(&a, &q.YminusX)
	mm.Multiply(&b, &q.YplusX)
	tt.Multiply(&p.T, &q.T2d) // −(2d·x·y) below: c and d swap
	z2.Add(&p.Z, &p.Z)
	a.Subtract(&pp, &mm)
	b.Add(&pp, &mm)
	c.Subtract(&z2, &tt)
	d.Add(&z2, &tt)
	p.X.Multiply(&a, &d)
	p.Y.Multiply(&b, &c)
	p.Z.Multiply(&c, &d)
	p.T.Multiply(&a, &b)
}

// encode returns p's 32-byte encoding, by edwards25519's own Point.Bytes;
// false if p is not on the curve (which the additions cannot make).
func (p *extPoint) encode() ([]byte, bool) {
	q, err := new(edwards25519.Point).SetExtendedCoordinates(&p.X, &p.Y, &p.Z, &p.T)
	if err != nil {
		return nil, false
	}
	return q.Bytes(), true
}

// curveD2 returns 2d, d = −121665/121666 being the curve's constant.
func curveD2() *field.Element {
	var num, den field.Element
	if _, err := num.SetBytes(le32(121665)); err != nil {
		panic(err)
	}
	if _, err := den.SetBytes(le32(121666)); err != nil {
		panic(err)
	}
	num.Multiply(&num, den.Invert(&den))
	num.Negate(&num)
	return num.Add(&num, &num)
}

// le32 is v as a 32-byte little-endian field element encoding.
func le32(v uint32) []byte {
	b := make([]byte, 32)
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	return b
}

// toAffine sets dst[i] to src[i] with Z = 1, for a mixed addition, with
// one inversion for all of them (see invertAll). d2 is curveD2().
func toAffine(dst []affinePoint, src []edwards25519.Point, d2 *field.Element) {
	invZ := make([]field.Element, len(src))
	for i := range src {
		_, _, z, _ := src[i].ExtendedCoordinates()
		invZ[i].Set(z)
	}
	invertAll(invZ) // a Point's Z is never zero
	for i := range src {
		x, y, _, t := src[i].ExtendedCoordinates()
		q := &dst[i]
		q.YplusX.Add(y, x)
		q.YplusX.Multiply(&q.YplusX, &invZ[i])
		q.YminusX.Subtract(y, x)
		q.YminusX.Multiply(&q.YminusX, &invZ[i])
		q.T2d.Multiply(t, d2)
		q.T2d.Multiply(&q.T2d, &invZ[i])
	}
}

// encodeAll sets out[i] to ps[i]'s 32-byte encoding, as encode does (y,
// with x's sign in the top bit), with one inversion for all the points
// instead of one each, which is about a fifth of a check; false, with out
// unset, if a point's Z is zero (the additions make none).
func encodeAll(ps []extPoint, out [][32]byte) bool {
	invZ := make([]field.Element, len(ps))
	for i := range ps {
		invZ[i].Set(&ps[i].Z)
	}
	if !invertAll(invZ) {
		return false
	}
	var x, y field.Element
	for i := range ps {
		x.Multiply(&ps[i].X, &invZ[i])
		y.Multiply(&ps[i].Y, &invZ[i])
		copy(out[i][:], y.Bytes())
		out[i][31] |= byte(x.IsNegative() << 7)
	}
	return true
}

// invertAll sets each zs[i] to its inverse with one inversion for all of
// them (Montgomery's trick): three multiplications each instead of an
// inversion (about 265); false, with zs unchanged, if one is zero.
func invertAll(zs []field.Element) bool {
	if len(zs) == 0 {
		return true
	}
	prefix := make([]field.Element, len(zs)) // prefix[i] = z0·…·zi
	prefix[0].Set(&zs[0])
	for i := 1; i < len(zs); i++ {
		prefix[i].Multiply(&prefix[i-1], &zs[i])
	}
	var zero, inv, t field.Element
	if prefix[len(zs)-1].Equal(&zero) == 1 {
		return false
	}
	inv.Invert(&prefix[len(zs)-1]) // 1/(z0·…·zn-1)
	for i := len(zs) - 1; i > 0; i-- {
		t.Multiply(&inv, &prefix[i-1]) // 1/zi
		inv.Multiply(&inv, &zs[i])     // 1/(z0·…·zi-1)
		zs[i].Set(&t)
	}
	zs[0].Set(&inv)
	return true
}
