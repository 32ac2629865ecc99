#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static volatile int stop=0;
static void pin(){cpu_set_t s;CPU_ZERO(&s);CPU_SET(0,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void* idle_spin(void*a){pin();struct sched_param p={0};if(sched_setscheduler(0,SCHED_IDLE,&p))perror("idle");while(!stop);return 0;}
static void* waker(void*a){pin();while(!stop){struct timespec d={0,5000000};nanosleep(&d,0);double t=now();while(now()-t<10e-6);}return 0;}
int main(int c,char**v){int idle=atoi(v[1]),wk=atoi(v[2]);pin();pthread_t a,b;
 if(idle)pthread_create(&a,0,idle_spin,0); if(wk)pthread_create(&b,0,waker,0);
 double t0=now(),last=t0,maxg=0;int big=0;long n=0;
 while(now()-t0<3){double t=now();double g=t-last;if(g>maxg)maxg=g;if(g>1e-3)big++;last=t;n++;}
 stop=1;printf("idle=%d waker=%d: max gap %.3f ms, gaps>1ms: %d\n",idle,wk,maxg*1e3,big);}
