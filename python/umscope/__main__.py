from umscope.cli import main

raise SystemExit(main())
