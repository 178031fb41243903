package modbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/devices"
)

// read reads points with the fewest requests (planRead) and returns
// {name: value}, scaled.
func (d *Device) read(ctx context.Context, points []Point) (json.RawMessage, error) {
	runs := planRead(points, d.spec.maxRead)
	vals := make(map[readRun][]uint16, len(runs))
	for _, r := range runs {
		v, err := d.readRun(ctx, r)
		if err != nil {
			return nil, readFailed(r, err)
		}
		vals[r] = v
	}
	out := make(map[string]json.RawMessage, len(points))
	for _, p := range points {
		r, _ := covering(runs, p)
		w := vals[r][int(p.Address)-int(r.addr):]
		if p.Table.bits() {
			out[p.Name] = DecodeBit(w[0] != 0)
		} else {
			out[p.Name] = p.DecodeWords(w[:p.Words()])
		}
	}
	return json.Marshal(out)
}

// readRun reads one run; bits come back as words 0 and 1.
func (d *Device) readRun(ctx context.Context, r readRun) ([]uint16, error) {
	req := r.pdu()
	var vals []uint16
	err := d.conn.roundTrip(ctx, req, func(res PDU) error {
		if !r.table.bits() {
			w, err := parseRegisters(req, res)
			vals = w
			return err
		}
		b, err := parseBits(req, res)
		vals = make([]uint16, len(b))
		for i, on := range b {
			if on {
				vals[i] = 1
			}
		}
		return err
	})
	return vals, err
}

// rawRead returns {"values": [...]}: words, or booleans for bit tables.
func (d *Device) rawRead(ctx context.Context, r readRun) (json.RawMessage, error) {
	v, err := d.readRun(ctx, r)
	if err != nil {
		return nil, readFailed(r, err)
	}
	if !r.table.bits() {
		return json.Marshal(map[string][]uint16{"values": v})
	}
	bits := make([]bool, len(v))
	for i, w := range v {
		bits[i] = w != 0
	}
	return json.Marshal(map[string][]bool{"values": bits})
}

// readFailed maps a failed read: a read changes nothing, so its failure
// codes hold even when the request went out.
func readFailed(r readRun, err error) error {
	what := fmt.Sprintf("read %s %d..%d", r.table, r.addr, r.end()-1)
	var exc *ExceptionError
	var le *linkError
	switch {
	case errors.As(err, &exc):
		return &devices.Error{Code: devices.CodeDeviceError, Message: what + ": " + exc.Name(), Err: err}
	case errors.As(err, &le):
		return &devices.Error{Code: le.code, Message: what + ": " + le.Error(), Err: err}
	}
	return &devices.Error{Code: devices.CodeDeviceError, Message: what + ": " + err.Error(), Err: err}
}
