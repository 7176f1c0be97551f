package service

import (
	"context"

	"github.com/legion-dev/legion/controller"
)

// NewTicker returns one tick of Run's loop for o's team, to call as often
// as a test likes: the sources and dispatcher Run wires (tickParts), made
// once as Run makes them, and controller.Tick, which Run's loop calls at
// each interval or wake.
func NewTicker(o Options) func(context.Context) controller.TickResult {
	src, disp, _ := tickParts(o)
	return func(ctx context.Context) controller.TickResult { return controller.Tick(ctx, src, disp, o.Log) }
}
