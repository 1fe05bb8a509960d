package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/dcm-project/k8s-container-sp/api/v1alpha1"
	"github.com/dcm-project/k8s-container-sp/internal/container"
)

// listPage is a LIST answer (v1alpha1.ContainerList) written as it is read: the store
// is read in runs of listRun and each container is encoded on its own, so one request
// holds a run of views and one container's JSON, however large its page. The page ends
// at size containers or before the one that would take its encoded containers past
// maxBytes (at least one either way); next_page_token is then the last one's id.
type listPage struct {
	store    Store
	size     int
	maxBytes int
	first    []container.Observed // the first run, read before the answer started
	more     bool                 // whether more followed the first run
	log      *slog.Logger
}

var _ v1alpha1.ListContainersResponseObject = (*listPage)(nil)

func (p *listPage) VisitListContainersResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte(`{"containers":[`)); err != nil {
		return nil // the client is gone; nothing more to say
	}
	run, more := p.first, p.more
	written, size, last, cut := 0, 0, "", false
	// One buffer and encoder for the page: json.Marshal would copy each container's
	// JSON into a new slice, garbage the collector then pays for at every page.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for {
		for _, o := range run {
			if written == p.size {
				cut = true
				break
			}
			buf.Reset()
			if written > 0 {
				buf.WriteByte(',')
			}
			if err := enc.Encode(container.ToAPI(o)); err != nil {
				return err
			}
			buf.Truncate(buf.Len() - 1) // Encode's newline
			if written > 0 && size+buf.Len() > p.maxBytes {
				cut = true
				break
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil
			}
			written, size, last = written+1, size+buf.Len(), o.Deployment.ID
		}
		if cut || !more {
			break
		}
		if written == p.size {
			cut = true // the store has more
			break
		}
		var err error
		run, more, err = p.store.List(last, min(p.size-written, listRun))
		if err != nil {
			// The answer has begun: end the page here. Its token lets the client go
			// on, and its next request meets the error as a problem.
			p.log.Warn("LIST page cut short", "err", err)
			cut = true
			break
		}
		if len(run) == 0 {
			break
		}
	}
	end := []byte("]}\n")
	if cut && written > 0 {
		tok, _ := json.Marshal(encodePageToken(last))
		end = append(append([]byte(`],"next_page_token":`), tok...), "}\n"...)
	}
	_, _ = w.Write(end)
	return nil
}
