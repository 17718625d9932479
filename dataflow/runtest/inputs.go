package runtest

import (
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/job"
)

// Gen sizes the generated inputs of a test run; Inputs turns it into the
// input specs of a built-in job. The numbers stay with each executor's
// tests (they tune them to their scenarios); what is shared is how a job's
// inputs are laid out.
type Gen struct {
	Records  int   // in total, over all of the job's inputs
	Keys     int   // distinct keys of a single-input job
	JoinKeys int   // distinct keys of each of the join's two inputs
	Seed     int64 // the join's payments input uses Seed+1, so its two inputs differ
	Rate     int   // records/s of each input; 0: as fast as possible
}

// Inputs returns the input specs for jobName: the join reads orders and
// payments, half of the records each; every other job reads one input.
func (g Gen) Inputs(jobName string) map[string]string {
	pace := ""
	if g.Rate > 0 {
		pace = fmt.Sprintf(",rate=%d", g.Rate)
	}
	if jobName == "join" {
		return map[string]string{
			job.InputOrders:   fmt.Sprintf("gen:records=%d,keys=%d,seed=%d%s", g.Records/2, g.JoinKeys, g.Seed, pace),
			job.InputPayments: fmt.Sprintf("gen:records=%d,keys=%d,seed=%d%s", g.Records/2, g.JoinKeys, g.Seed+1, pace),
		}
	}
	return map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=%d,seed=%d%s", g.Records, g.Keys, g.Seed, pace)}
}
