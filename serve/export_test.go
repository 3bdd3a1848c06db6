package serve

// WaitMaintenance waits until no background maintenance runs.
func (s *Server) WaitMaintenance() {
	s.mu.RLock()
	all := make([]*served, 0, len(s.indexes))
	for _, sv := range s.indexes {
		all = append(all, sv)
	}
	s.mu.RUnlock()
	for _, sv := range all {
		sv.wg.Wait()
	}
}

// Routes are the API's patterns, as registered.
func (s *Server) Routes() []string { return s.routes }
