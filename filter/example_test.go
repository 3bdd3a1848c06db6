package filter_test

import (
	"fmt"

	"github.com/vlc-embed/vlc/filter"
)

func Example() {
	e, err := filter.Parse([]byte(`{"cat": {"$in": ["news", "blog"]}, "n": {"$gte": 10, "$lt": 20}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Match([]byte(`{"cat": "news", "n": 12}`)), e.Match([]byte(`{"cat": "news", "n": 20}`)))

	// The same filter from the builders, and its canonical JSON.
	built := filter.And(filter.In("cat", "news", "blog"), filter.Gte("n", 10), filter.Lt("n", 20))
	fmt.Println(built)

	// A segment's index on cat: Resolve narrows to the rows with a cat of
	// news or blog; n is not indexed, so the caller checks them with Match.
	payloads := []string{`{"cat": "news", "n": 12}`, `{"cat": "sport", "n": 15}`, `{"cat": "blog", "n": 30}`}
	cols, err := filter.NewColumns(len(payloads), func(row int) ([]byte, error) { return []byte(payloads[row]), nil }, []string{"cat"})
	if err != nil {
		fmt.Println(err)
		return
	}
	rows, exact := e.Resolve(cols)
	fmt.Println(rows.ToArray(), exact)

	_, err = filter.Parse([]byte(`{"$and": [{"cat": "a"}, {"n": {"$gte": true}}]}`))
	fmt.Println(err)
	// Output:
	// true false
	// {"$and":[{"cat":{"$in":["news","blog"]}},{"n":{"$gte":10}},{"n":{"$lt":20}}]}
	// [0 2] false
	// filter: $and[1].n: $gte wants a number or a string, got true
}
